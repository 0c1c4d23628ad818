"""scheduler-plugins (kubernetes-sigs), bundled: plugins configured by their upstream names, with
their upstream args and CustomResourceDefinitions, so kube-scheduler configurations written for
scheduler-plugins' image work unchanged.

Each plugin is a package with a README (what it does, its args, its CRD, an example). They are
written against the framework's public plugin API only, as any out-of-tree plugin is, and are
registered by ``kubesched.contrib.registry``, which the commands merge with the in-tree plugins.
"""
