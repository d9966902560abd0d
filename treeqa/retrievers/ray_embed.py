"""Embedding a corpus as a Ray Data job (`treeqa index build --corpus-file FILE --ray ADDRESS`).

The same streamed build as on one machine (`streaming`), with the embedding step spread over
a Ray cluster: the passages go out in windows of `WINDOW_BATCHES` batches, each window runs as
`map_batches` over a pool of encoder actors (one GPU each where the cluster has GPUs), and
the vectors come back by row into the same on-disk array. Progress is saved after every
window, so a killed build resumes from the last finished one. Ray is an optional extra
(`pip install -e ".[ray]"`); treeqa and the encoder package must be installed on the workers.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from tqdm import tqdm

from treeqa.retrievers import store
from treeqa.retrievers.encoder import load_encoder

WINDOW_BATCHES = 64


class _Encoder:
    """A Ray Data actor: loads the encoder once, on the worker's GPU when it has one."""

    def __init__(self):
        import torch  # heavy: loaded on the Ray worker that runs this actor

        self.model = load_encoder()
        if torch.cuda.is_available():
            self.model = self.model.to("cuda")

    def __call__(self, batch: dict) -> dict:
        vectors = self.model.encode(list(batch["text"]), batch_size=64, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False)
        return {"row": batch["row"], "vector": np.asarray(vectors, dtype=np.float32)}


def connect(address: str):
    """Join the cluster at `address` ("local" starts a Ray instance in this process's machine)."""
    try:
        import ray  # an optional extra (`pip install -e ".[ray]"`)
    except ImportError as exc:
        raise RuntimeError('--ray needs Ray: pip install -e ".[ray]"') from exc
    if not ray.is_initialized():
        if address == "local":  # a busy small machine starts Ray's agents slower than its defaults wait
            os.environ.setdefault("RAY_agent_register_timeout_ms", "180000")
            os.environ.setdefault("RAY_raylet_start_wait_time_s", "180")
        ray.init(address=None if address == "local" else address, include_dashboard=False,
                 log_to_driver=False, configure_logging=False)
    return ray


def embed(staging: Path, n: int, done: int, address: str, batch_size: int, progress: bool,
          save_progress, vectors_file: str, dim: int) -> None:
    """Fill rows `done..n` of the array in `staging` with the encoder run as a Ray Data job."""
    ray = connect(address)
    resources = ray.cluster_resources()
    gpus = int(resources.get("GPU", 0))
    workers = gpus or max(1, int(resources.get("CPU", 1)) // 2)
    mode = "r+" if (staging / vectors_file).is_file() else "w+"
    vectors = np.lib.format.open_memmap(staging / vectors_file, mode=mode, dtype=np.float32, shape=(n, dim))
    passages = store.PassageStore(staging)
    window = batch_size * WINDOW_BATCHES
    with tqdm(total=n, initial=done, unit="passage", desc=f"embedding on Ray ({workers} workers)",
              disable=not progress, dynamic_ncols=True) as bar:
        for start in range(done, n, window):
            end = min(n, start + window)
            items = [{"row": start + i, "text": p.as_text()} for i, p in enumerate(passages[start:end])]
            dataset = ray.data.from_items(items).map_batches(
                _Encoder, batch_size=batch_size, concurrency=workers, num_gpus=1 if gpus else 0,
                batch_format="numpy")
            filled = 0
            for out in dataset.iter_batches(batch_size=None, batch_format="numpy"):
                batch = np.asarray(out["vector"], dtype=np.float32)
                if batch.ndim != 2 or batch.shape[1] != dim:
                    raise ValueError(f"the Ray encoder returned vectors of shape {batch.shape}, not (*, {dim})")
                vectors[np.asarray(out["row"], dtype=np.int64)] = batch
                filled += len(batch)
            if filled != end - start:
                raise RuntimeError(f"the Ray job returned {filled} vectors for {end - start} passages")
            vectors.flush()
            save_progress(staging, {"passages": n, "embedded": end})
            bar.update(end - start)
    del vectors
