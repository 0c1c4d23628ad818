"""In-tree plugins, one package each, named as upstream's (``nodeaffinity`` holds NodeAffinity);
``registry`` lists them. Helpers shared by several plugins are private modules here (``_hints``,
``_topology``, ...) or the ``volumeutil`` package; ``names`` holds the plugin names as
configuration files spell them.

Plugins import the framework, the node table, the client and the API types, never the scheduler
loop, the simulator or the API server (import-linter checks this).
"""
