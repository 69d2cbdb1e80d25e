"""The emulator's pure API-server semantics: selectors, merges, server-side apply ownership."""
import pytest

from tests.support import k8s_semantics as sem


@pytest.mark.parametrize("selector,labels,expected", [
    ("a=1", {"a": "1"}, True), ("a==1", {"a": "2"}, False), ("a!=1", {}, True),
    ("a in (1, 2),b", {"a": "2", "b": ""}, True), ("a notin (1)", {"a": "1"}, False),
    ("!a", {"a": "x"}, False), ("k3.gpustack.ai/deployment", {"k3.gpustack.ai/deployment": "m"}, True),
])
def test_label_selectors(selector, labels, expected):
    assert sem.label_match(labels, selector) is expected


def test_bad_selectors_are_rejected():
    for bad in ("a=(b", "a in b", "=x"):
        with pytest.raises(sem.SelectorError):
            sem.label_match({}, bad)


def test_field_selector_reads_nested_fields():
    obj = {"metadata": {"name": "p"}, "status": {"phase": "Running"}}
    assert sem.field_match(obj, "metadata.name=p,status.phase!=Failed")
    assert not sem.field_match(obj, "status.phase=Pending")


def test_merge_and_strategic_merge():
    assert sem.merge_patch({"a": {"b": 1, "c": 2}}, {"a": {"b": None, "d": 3}}) == {"a": {"c": 2, "d": 3}}
    cur = {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}
    out = sem.strategic_merge(cur, {"containers": [{"name": "b", "image": "2"}, {"name": "c", "image": "3"}]})
    assert out == {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}, {"name": "c", "image": "3"}]}


def test_apply_prunes_only_fields_the_manager_stopped_applying():
    cfg1 = {"spec": {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}], "replicas": 1}}
    obj, owners = sem.apply(None, cfg1, {}, "op", force=False)
    obj["spec"]["paused"] = True
    owners = sem.record_update(sem.apply(None, cfg1, {}, "op", force=False)[0], obj, owners, "kubectl")
    cfg2 = {"spec": {"env": [{"name": "A", "value": "1"}], "replicas": 1}}
    obj2, owners2 = sem.apply(obj, cfg2, owners, "op", force=False)
    assert obj2 == {"spec": {"env": [{"name": "A", "value": "1"}], "replicas": 1, "paused": True}}
    assert ("spec", "paused") in owners2["kubectl"]


def test_apply_conflicts_unless_forced():
    obj, owners = sem.apply(None, {"spec": {"image": "a"}}, {}, "one", force=False)
    with pytest.raises(sem.ApplyConflict) as e:
        sem.apply(obj, {"spec": {"image": "b"}}, owners, "two", force=False)
    assert e.value.conflicts == [("one", ("spec", "image"))]
    obj2, owners2 = sem.apply(obj, {"spec": {"image": "b"}}, owners, "two", force=True)
    assert obj2["spec"]["image"] == "b" and "one" not in owners2
    same, _ = sem.apply(obj, {"spec": {"image": "a"}}, owners, "two", force=False)  # same value: shared, no conflict
    assert same["spec"]["image"] == "a"


def test_quantities_are_canonical_strings():
    pod = {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 8, "cpu": 0.5, "memory": "1Gi"}}}],
                    "volumes": [{"emptyDir": {"sizeLimit": 16}}]}}
    out = sem.canonicalize_quantities(pod)
    assert out["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8", "cpu": "500m", "memory": "1Gi"}
    assert out["spec"]["volumes"][0]["emptyDir"]["sizeLimit"] == "16"
