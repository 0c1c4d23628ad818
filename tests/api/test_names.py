"""apimachinery's name validators return every message Go's would, in Go's order."""

import pytest

from kubesched.api.names import dns1123_label_errors, dns1123_subdomain_errors, label_value_errors, qualified_name_errors
from kubesched.api.validation import validate

QNAME_REGEX = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
               "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
               "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
SUBDOMAIN_REGEX = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
                   "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
                   "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_REGEX = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
               "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
               "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
VALUE_REGEX = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
               "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
               "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


@pytest.mark.parametrize(("check", "value", "messages"), [
    pytest.param(qualified_name_errors, "example.com/app", [], id="qualified name with a prefix"),
    pytest.param(qualified_name_errors, "a/", ["name part must be non-empty", "name part " + QNAME_REGEX],
                 id="empty name part fails both the emptiness and the regex check"),
    pytest.param(qualified_name_errors, "/-a", ["prefix part must be non-empty", "name part " + QNAME_REGEX],
                 id="prefix and name both reported"),
    pytest.param(qualified_name_errors, "Bad_Prefix/a", ["prefix part " + SUBDOMAIN_REGEX], id="prefix regex"),
    pytest.param(qualified_name_errors, "-" * 64, ["name part must be no more than 63 characters", "name part " + QNAME_REGEX],
                 id="too long and malformed"),
    pytest.param(qualified_name_errors, "a/b/c", ["a qualified name " + QNAME_REGEX
                                                  + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"],
                 id="two slashes"),
    pytest.param(label_value_errors, "", [], id="empty label value"),
    pytest.param(label_value_errors, "-" + "a" * 63, ["must be no more than 63 characters", VALUE_REGEX],
                 id="label value too long and malformed"),
    pytest.param(dns1123_label_errors, "a.b", ["must not contain dots"], id="a subdomain is not a label"),
    pytest.param(dns1123_label_errors, "A" * 64, ["must be no more than 63 characters", LABEL_REGEX], id="label too long"),
    pytest.param(dns1123_subdomain_errors, "a" * 254, ["must be no more than 253 characters"], id="subdomain too long"),
    pytest.param(dns1123_subdomain_errors, "Bad_Name", [SUBDOMAIN_REGEX], id="subdomain regex"),
])
def test_validators_return_every_go_message(check, value, messages):
    assert check(value) == messages


def test_object_names_report_every_message_as_its_own_error():
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team.a"}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "-" * 64}},
           "spec": {"containers": [{"name": "c", "image": "i"}]}}
    assert [str(e) for e in validate(namespace)] == ['metadata.name: Invalid value: "team.a": must not contain dots']
    assert [str(e) for e in validate(pod)] == [
        f'metadata.labels: Invalid value: "{"-" * 64}": must be no more than 63 characters',
        f'metadata.labels: Invalid value: "{"-" * 64}": {VALUE_REGEX}',
    ]
