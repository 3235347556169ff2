import pytest

from workloads import protocol
from workloads.protocol import Result, Spec, Workload, register


def test_spec_round_trip_ignores_unknown_keys():
    spec = Spec(workload="x", vcpus=4, config={"batch_size": 8})
    again = Spec.from_json(spec.to_json().replace("{", '{"future_field": 1, ', 1))
    assert again == spec


def test_result_refuses_newer_schema():
    r = Result(workload="x", framework="t", unit="u/s", profile="cpu-small", throughput=3.0)
    assert Result.from_json(r.to_json()).throughput == 3.0
    newer = r.to_json().replace('"schema_version": 1', '"schema_version": 99')
    with pytest.raises(ValueError, match="newer"):
        Result.from_json(newer)


def test_registry_refuses_duplicate_names():
    class A(Workload):
        name = "test-dup-name"
        defaults = {"cpu-small": {}}

    class B(Workload):
        name = "test-dup-name"
        defaults = {"cpu-small": {}}

    register(A)
    register(A)  # the same class twice is harmless (module re-import)
    with pytest.raises(ValueError, match="duplicate"):
        register(B)
    protocol._REGISTRY.pop("test-dup-name")


def test_config_for_merges_overrides_and_refuses_unknown_profile():
    class C(Workload):
        name = "test-config"
        defaults = {"cpu-small": {"batch_size": 8, "lr": 0.1}}

        def run(self, spec):
            return self.new_result(spec, self.config_for(spec))

    spec = Spec(workload="test-config", profile="cpu-small", config={"batch_size": 4})
    assert C().config_for(spec) == {"batch_size": 4, "lr": 0.1}
    with pytest.raises(ValueError, match="no profile"):
        C().config_for(Spec(workload="test-config", profile="gpu"))
