"""The embedded engine on a busy CPU: generation runs on the cores other processes left idle since
the last call (beside a busy process 2 threads generated 11 tokens a second, 1 thread 24; alone 2
threads 34: benchmarks/engine_under_load.md); prompts keep every thread."""

import types

import dspy
import pytest

import treeqa.lm._engine as engine_module
from tests.fakes import FakeLlama
from treeqa.lm import LlamaEngine
from treeqa.lm._cpu_share import CpuShare, generation_threads


class FakeProc:
    """/proc/stat and /proc/self/stat as files, with a clock the test moves."""

    def __init__(self, tmp_path):
        self.stat, self.own, self.now = tmp_path / "stat", tmp_path / "self-stat", 0.0
        self.machine_busy = self.own_ticks = 0
        self.write()

    def write(self):
        # user nice system idle iowait irq softirq steal: busy ticks all in user
        self.stat.write_text(f"cpu  {self.machine_busy} 0 0 5000 7 0 0 0 0 0\ncpu0 1 2 3 4\n")
        # the command name holds spaces and a parenthesis, as it may; utime and stime are fields 14 and 15
        fields = ["S"] + ["0"] * 10 + [str(self.own_ticks), "0"] + ["0"] * 30
        self.own.write_text("4242 (python (x) y) " + " ".join(fields) + "\n")

    def advance(self, seconds: float, others_cores: float, own_cores: float):
        self.now += seconds
        self.own_ticks += round(own_cores * seconds * 100)
        self.machine_busy += round((own_cores + others_cores) * seconds * 100)
        self.write()

    def share(self) -> CpuShare:
        return CpuShare(self.stat, self.own, clock=lambda: self.now, ticks_per_s=100)


def test_the_cores_other_processes_used_are_read_from_proc(tmp_path):
    proc = FakeProc(tmp_path)
    share = proc.share()
    proc.advance(2.0, others_cores=1.0, own_cores=1.0)
    assert share.others_busy() == pytest.approx(1.0)
    proc.advance(1.0, others_cores=0.0, own_cores=2.0)  # only this process: nobody else
    assert share.others_busy() == pytest.approx(0.0)


def test_a_window_too_short_to_tell_grows_to_the_next_reading(tmp_path):
    proc = FakeProc(tmp_path)
    share = proc.share()
    proc.advance(0.1, others_cores=2.0, own_cores=0.0)
    assert share.others_busy() is None
    proc.advance(0.4, others_cores=0.0, own_cores=0.0)
    assert share.others_busy() == pytest.approx(0.4)  # 20 ticks over the whole 0.5 s


def test_without_proc_nothing_is_read(tmp_path):
    share = CpuShare(tmp_path / "absent", tmp_path / "absent-too")
    assert share.others_busy() is None


@pytest.mark.parametrize(("threads", "busy", "cores", "expected"), [
    (2, 0.0, 2, 2), (2, 0.3, 2, 2), (2, 0.6, 2, 1), (2, 2.0, 2, 1), (4, 1.0, 4, 3), (2, 1.0, 8, 2)])
def test_generation_threads_are_the_idle_cores(threads, busy, cores, expected):
    assert generation_threads(threads, busy, cores) == expected


def test_the_engine_generates_on_the_idle_cores_and_keeps_every_thread_for_prompts(tmp_path, monkeypatch):
    proc = FakeProc(tmp_path)
    set_calls = []
    monkeypatch.setattr(engine_module, "CpuShare", proc.share)
    monkeypatch.setitem(__import__("sys").modules, "llama_cpp", types.SimpleNamespace(
        llama_set_n_threads=lambda ctx, gen, batch: set_calls.append((ctx, gen, batch))))
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    fake = FakeLlama()
    fake._ctx = types.SimpleNamespace(ctx="CTX")
    engine = LlamaEngine(llama=fake, n_threads=2)
    lm = dspy.LM("local/fake", engine=engine, cache=False, num_retries=0)
    ask = dspy.Predict("question -> answer")
    with dspy.context(lm=lm):
        proc.advance(3.0, others_cores=1.0, own_cores=1.0)  # a busy process beside the last call
        ask(question="q1")
        proc.advance(3.0, others_cores=1.0, own_cores=1.0)  # still busy: nothing to change
        ask(question="q2")
        proc.advance(3.0, others_cores=0.05, own_cores=2.0)  # alone again
        ask(question="q3")
    assert set_calls == [("CTX", 1, 2), ("CTX", 2, 2)] and engine.generating_with == 2


def test_adapting_can_be_turned_off(tmp_path, monkeypatch, settings_env):
    settings_env(adapt_threads="false")
    fake = FakeLlama()
    fake._ctx = types.SimpleNamespace(ctx="CTX")
    assert LlamaEngine(llama=fake, n_threads=2).cpu_share is None


def test_nothing_adapts_where_the_machine_has_cores_this_process_may_not_use(monkeypatch):
    """Under an affinity mask (a container's CPU set) /proc/stat counts the host's other cores too."""
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr("os.cpu_count", lambda: 64)
    fake = FakeLlama()
    fake._ctx = types.SimpleNamespace(ctx="CTX")
    assert LlamaEngine(llama=fake, n_threads=2).cpu_share is None
