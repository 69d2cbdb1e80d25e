"""The informer cache (gpustack_k3.operator.informer.Store): our own write results vs. the watch."""
from gpustack_k3.operator.informer import Store


def obj(name, rv, ns="llm"):
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": str(rv)}}


def test_a_write_result_overtaken_by_the_deletion_does_not_resurrect_the_object():
    s = Store()
    s.upsert(obj("a", 5))
    s.remove(obj("a", 7))                        # the watch: DELETED at rv 7
    assert not s.upsert(obj("a", 6), if_newer=True)   # our apply's answer arrives late
    assert s.get("llm", "a") is None
    assert s.upsert(obj("a", 9), if_newer=True)  # created again afterwards: a new object
    assert s.get("llm", "a")["metadata"]["resourceVersion"] == "9"
    s.remove(obj("a", 10))
    assert s.upsert(obj("a", 12))                # from the watch (ADDED after re-creation)


def test_newer_copy_wins_and_same_version_is_no_change():
    s = Store()
    assert s.upsert(obj("a", 5), if_newer=True)
    assert not s.upsert(obj("a", 5), if_newer=True) and not s.upsert(obj("a", 4), if_newer=True)
    assert s.upsert(obj("a", 6), if_newer=True)


def test_tombstones_are_bounded():
    s = Store()
    s.TOMBSTONES = 10
    for i in range(25):
        s.remove(obj(f"o{i}", 100 + i))
    assert len(s._deleted) == 10
    assert s.upsert(obj("o0", 50), if_newer=True)     # forgotten: the oldest tombstones go first
    assert not s.upsert(obj("o24", 50), if_newer=True)


def test_a_relist_remembers_what_disappeared():
    s = Store()
    s.upsert(obj("a", 5))
    s.upsert(obj("b", 6))
    events = s.replace("llm", [obj("b", 6)], rv="20")
    assert [(e, o["metadata"]["name"]) for e, o in events] == [("DELETED", "a")]
    assert not s.upsert(obj("a", 8), if_newer=True)   # an answer from before the list: the object is gone
