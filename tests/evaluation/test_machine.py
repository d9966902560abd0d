"""Every summary says the machine it ran on, so two runs' seconds are compared only from one."""

from treeqa.evaluation.machine import machine

CPUINFO = """processor : 0
model name : Intel(R) Xeon(R) Processor
flags : fpu sse avx2 avx512f avx512_bf16 amx_bf16 amx_int8 amx_tile
processor : 1
model name : Intel(R) Xeon(R) Processor
"""


def test_the_machine_names_its_cpu_the_flags_that_matter_and_the_engines_threads():
    found = machine(CPUINFO, engine_threads=2)
    assert found["cpu"] == "Intel(R) Xeon(R) Processor" and found["engine_threads"] == 2
    assert found["flags"] == ["avx2", "avx512f", "avx512_bf16", "amx_int8", "amx_bf16"]
    assert found["cores"] >= 1
    amd = machine("model name : AMD EPYC\nflags : fpu avx2\n")
    assert amd["flags"] == ["avx2"] and "engine_threads" not in amd  # an endpoint's run: no engine here


def test_a_summary_records_its_machine(scripted, tmp_path):
    import json

    from treeqa.evaluation.runs import EvalSpec, run_evaluation

    run_evaluation(EvalSpec(program="direct", dataset="hotpotqa", n=1), tmp_path / "r")
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["machine"]["cores"] >= 1 and "flags" in summary["machine"]
