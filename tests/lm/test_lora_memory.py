"""The training hands its freed memory back (treeqa.lm.lora.release_freed_memory): with glibc's
sliding mmap threshold a large block freed and asked for again stays resident; trimmed, it goes
back to the system. The allocator runs in a fresh interpreter, whose heap no test has touched;
the trainer calls the trim once an example."""

import ctypes
import os
import subprocess
import sys
import textwrap

import pytest

from treeqa.lm import lora

# Two rounds of an 8 MiB block, written then freed (the second comes from the heap, as the first
# raised the threshold), then the trim or not; prints the resident KiB.
ROUNDS = textwrap.dedent("""
    import ctypes, sys
    from treeqa.lm.lora import release_freed_memory
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    for _ in range(2):
        block = libc.malloc(8 << 20)
        ctypes.memset(block, 1, 8 << 20)
        libc.free(block)
    if sys.argv[1] == "trimmed":
        assert release_freed_memory()
    print(int(open("/proc/self/statm").read().split()[1]) * 4)
""")


def glibc() -> bool:
    try:
        return hasattr(ctypes.CDLL(None), "gnu_get_libc_version")
    except OSError:
        return False


def resident_kib(mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}  # glibc's defaults
    out = subprocess.run([sys.executable, "-c", ROUNDS, mode], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


@pytest.mark.skipif(not (glibc() and os.path.exists("/proc/self/statm")), reason="glibc on Linux")
def test_a_freed_large_block_stays_resident_until_trimmed():
    assert resident_kib("kept") - resident_kib("trimmed") > 6 * 1024


def test_a_c_library_without_malloc_trim_is_left_as_it_is(monkeypatch):
    monkeypatch.setattr(ctypes, "CDLL", lambda name: object())
    assert lora.release_freed_memory() is False


def test_the_trainer_trims_once_an_example_and_once_a_validation_read(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from tests.fakes import tiny_model, tiny_tokenizer
    from treeqa.lm.lora import LoraRecipe, LoraTrainer, TokenizedExample

    calls = []
    monkeypatch.setattr(lora, "release_freed_memory", lambda: calls.append(1) or True)
    examples = [TokenizedExample(prompt=[1, 3 + i, 4, 5, 2], answer=[18, 2]) for i in range(4)]
    trainer = LoraTrainer(tiny_model(), tiny_tokenizer(), LoraRecipe(rank=2, top_layers=1, accumulate=2),
                          base_id="tiny", work_dir=tmp_path)
    trainer.train(examples, progress=False, validation=examples[:2], validate_every=2)
    # 4 examples; validation at 0, 2 and 4 of 2 reads each
    assert len(calls) == 4 + 3 * 2
