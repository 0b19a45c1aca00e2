"""The train step on a GPU, through the whole platform (`echoray train` in-process on a
local Ray): CIFAR ResNet-32 on generated CIFAR-format data and ResNet-50 on synthetic
224x224 images (Parquet, decoded and cropped by the CPU actors), each with
fp32 vs bf16 + channels_last, and echo.factor 1 vs auto (the actor pool is kept small,
so the CPU pipeline is the bottleneck and auto has something to do).

Per case: trained examples/s over the training loop, peak GPU memory of rank 0
(torch.cuda.max_memory_allocated), and the fraction of wall time the GPU was busy
(nvidia-smi's utilization.gpu, "percent of time one or more kernels was executing",
sampled every 0.2 s from the first step to the end of the run).

    python benchmarks/gpu_step.py                 # on a machine with a GPU (a few minutes)
    python benchmarks/gpu_step.py --tiny          # the CPU path, tiny data (tested)

Results: benchmarks/results/gpu_step.json (--tiny: gpu_step_tiny.json).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, save  # noqa: E402

PRECISIONS = {"fp32": ["train.precision=fp32", "train.channels_last=false"],
              "bf16+channels_last": ["train.precision=bf16", "train.channels_last=true"]}


class GpuBusy:
    """Samples nvidia-smi's utilization.gpu in the background (None without nvidia-smi)."""

    def __init__(self, interval_s: float = 0.2):
        self.samples: list[tuple[float, float]] = []
        self.interval_s, self._stop = interval_s, threading.Event()
        self.available = shutil.which("nvidia-smi") is not None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                                  "-i", "0"], capture_output=True, text=True)
            if out.returncode == 0 and out.stdout.strip():
                self.samples.append((time.time(), float(out.stdout.split()[0]) / 100.0))
            self._stop.wait(self.interval_s)

    def __enter__(self) -> GpuBusy:
        if self.available:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self.available:
            self._thread.join()

    def fraction(self, since: float) -> float | None:
        values = [u for t, u in self.samples if t >= since]
        return sum(values) / len(values) if values else None


def make_data(root: Path, tiny: bool) -> dict[str, list[str]]:
    """Generated CIFAR-format batches and synthetic Parquet images; the overrides per model."""
    from echoray.data.fixtures import write_cifar10_bin, write_parquet

    cifar = write_cifar10_bin(root, per_batch=100 if tiny else 2000, batches=2 if tiny else 5,
                              test=100 if tiny else 1000)
    cases = {"cifar_resnet32": ["pipelines/cifar10_resnet32.yaml", f"source.path={cifar}",
                                f"model.name={'resnet20' if tiny else 'resnet32'}"]}
    if not tiny:
        pq = write_parquet(root / "synthetic.parquet", n=4096, classes=10, size=256, row_group=32)
        cases["imagenet_resnet50"] = ["pipelines/imagenet_resnet50.yaml", "source.kind=parquet", f"source.path={pq}",
                                      "source.eval_path=null", "source.holdout_fraction=0.05",
                                      "scaling.num_workers=1", "train.batch_size=128"]
    return cases


def run_case(pipeline: str, overrides: list[str], name: str, workdir: Path) -> dict:
    from echoray.config_load import load_config
    from echoray.run import train

    repo = Path(__file__).resolve().parents[1]
    cfg = load_config(repo / pipeline, [f"tracking.uri=sqlite:///{workdir}/mlflow.db", *overrides])
    t0 = time.time()
    with GpuBusy() as busy:
        s = train(cfg, pipeline, str(workdir / name), t0)
    first = t0 + (s["time_to_first_step_s"] or 0.0)
    return {
        "case": name, "device": s["device"], "precision": cfg.train.precision,
        "channels_last": cfg.train.channels_last, "echo_factor": cfg.echo.factor,
        "final_echo_factor": s["echo"]["final_factor"], "measured_R": s["measured_R"],
        "examples_per_s": s["trained_examples"] / s["train_loop_s"],
        "fresh_examples_per_s": s["fresh_examples"] / s["train_loop_s"],
        "peak_gpu_mib": s["peak_device_bytes"] / 2**20 if s["peak_device_bytes"] else None,
        "gpu_busy_fraction": busy.fraction(first), "steps": s["steps"], "accuracy": s["metric"]["value"],
        "batch_size": cfg.train.batch_size, "workers": s["workers"], "epochs": s["epochs"],
        "evaluations": s["evaluations"],
        "trained_examples": s["trained_examples"], "fresh_examples": s["fresh_examples"],
        "measured_echo_factor": s["echo"]["measured_factor"], "train_loop_s": s["train_loop_s"],
    }


def main(argv: list[str] | None = None) -> Path:
    p = argparse.ArgumentParser()
    p.add_argument("--tiny", action="store_true", help="tiny data, CPU-sized: the tested path")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--out", type=Path, help="result file (default benchmarks/results/gpu_step[_tiny].json)")
    args = p.parse_args(argv)
    from echoray.runtime.session import start_ray

    start_ray()
    results = []
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        for model, (pipeline, *data) in make_data(root, args.tiny).items():
            matrix = [(prec, e) for prec in PRECISIONS for e in ("1", "auto")]
            if args.tiny:  # two cases cover every code path of the script
                matrix = [("fp32", "1"), ("bf16+channels_last", "auto")]
            for prec, e in matrix:
                common = ["train.target=null", f"train.max_epochs={1 if args.tiny else args.epochs}",
                          "scaling.max_failures=0", "train.checkpoint_every=0",
                          "preprocess.actors.min_size=1", f"preprocess.actors.max_size={1 if args.tiny else 2}",
                          f"scaling.cpus_per_worker={0.5 if args.tiny else 2}"]
                if e == "auto":
                    common += ["echo.stage=after_augment", "echo.factor=auto", "echo.max_factor=4"]
                name = f"{model}-{prec}-e{e}"
                results.append(run_case(pipeline, [*data, *common, *PRECISIONS[prec]], name, root))
                print(json.dumps(results[-1]), flush=True)
    out = args.out or RESULTS / ("gpu_step_tiny.json" if args.tiny else "gpu_step.json")
    return save(out.stem, {"tiny": args.tiny, "cases": results}, args, path=out)


if __name__ == "__main__":
    print(main(), file=sys.stderr)
