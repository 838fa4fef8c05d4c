"""Runtime stats sampled by a background thread about once a second, never per step.

The training thread only takes ``time.perf_counter`` stamps (:class:`StepClock`); the
sampler thread turns them into averages over its window and adds process CPU and memory
(psutil), GPU utilisation, memory, temperature and power (NVML, when a driver is present)
and the CUDA caching allocator's counters.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psutil
import torch

from onthefly.protocol import RuntimeBody

log = logging.getLogger(__name__)


class StepClock:
    """Step and data-wait timing from stamps taken at each training batch.

    Data wait is the time between the end of one batch and the start of the next (the
    loader fetching); step time runs from a batch's start to its end. The training thread
    writes the fields (the :class:`~onthefly.callbacks._recorder.Recorder` stamps them
    inline: a method call per stamp would cost more than the stamp); the sampler thread
    reads them without locks (each read is atomic).

    Attributes:
        batch_start: the ``perf_counter`` stamp of the latest training batch's start, if any.
        last_end: the stamp of the latest batch's end (``None``: the time until the next
            batch is no data wait: a pause, an evaluation, a test came in between).
    """

    def __init__(self) -> None:
        self.steps = 0
        self.samples = 0
        self.step_time_total = 0.0
        self.data_wait_total = 0.0
        self.batch_start: float | None = None
        self.last_end: float | None = None

    def forget_gap(self) -> None:
        """Do not count the time until the next batch as data wait (pause, validation, test)."""
        self.last_end = None


def batch_size(batch: Any) -> int | None:
    """The leading dimension of the first tensor found in ``batch`` (no device access)."""
    first = batch[0] if type(batch) in (tuple, list) and batch else None
    if isinstance(first, torch.Tensor) and first.ndim > 0:  # (x, y): the usual batch, fast
        return int(first.shape[0])
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.ndim > 0 else None
    if isinstance(batch, Mapping):
        batch = list(batch.values())
    if isinstance(batch, Sequence) and not isinstance(batch, str | bytes):
        for item in batch:
            size = batch_size(item)
            if size is not None:
                return size
    return None


@dataclass
class _Window:
    time: float
    steps: int
    samples: int
    step_time_total: float
    data_wait_total: float


class RuntimeSampler:
    """A daemon thread publishing one ``runtime`` event per ``interval`` seconds.

    Args:
        clock: the stamps of the training thread.
        step: returns the current optimizer step.
        publish: sends the event.
        interval: seconds between samples.
    """

    def __init__(
        self,
        clock: StepClock,
        step: Callable[[], int],
        publish: Callable[[RuntimeBody], None],
        interval: float = 1.0,
    ) -> None:
        self._clock = clock
        self._step = step
        self._publish = publish
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._process = psutil.Process()
        self._gpus: _Nvml | None = None

    def start(self) -> None:
        """Start sampling; a second call is a no-op."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._gpus = _Nvml()
        self._process.cpu_percent(None)  # the first reading only sets psutil's reference point
        self._thread = threading.Thread(target=self._run, name="onthefly-runtime", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling and wait for the thread to end."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        # A Ctrl+C inside start() can leave a thread that never reported running: joining it
        # would raise; once running it sees the stop flag first thing and ends by itself.
        if thread.is_alive():
            thread.join(timeout=5)
        if self._gpus is not None:
            self._gpus.close()
            self._gpus = None

    def _run(self) -> None:
        previous = self._window()
        while not self._stop.wait(self._interval):
            try:
                current = self._window()
                self._publish(RuntimeBody(**self._sample(previous, current)))
                previous = current
            except Exception:  # sampling must never disturb the run; say so once
                log.warning("runtime sampling stopped after an error", exc_info=True)
                return

    def _window(self) -> _Window:
        c = self._clock
        now = time.perf_counter()
        return _Window(now, c.steps, c.samples, c.step_time_total, c.data_wait_total)

    def _sample(self, before: _Window, now: _Window) -> dict[str, Any]:
        steps = now.steps - before.steps
        elapsed = now.time - before.time
        memory = self._process.memory_info()
        fields: dict[str, Any] = {
            "step": self._step(),
            "step_time": (now.step_time_total - before.step_time_total) / steps if steps else None,
            "data_wait": (now.data_wait_total - before.data_wait_total) / steps if steps else None,
            "samples_per_s": (now.samples - before.samples) / elapsed if elapsed > 0 else None,
            "cpu_percent": self._process.cpu_percent(None),
            "rss_bytes": int(memory.rss),
            "gpus": self._gpus.read() if self._gpus is not None else [],
        }
        # Only read the allocator once the run itself initialised CUDA: never initialise it here.
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            fields["cuda_allocated"] = int(torch.cuda.memory_allocated())
            fields["cuda_reserved"] = int(torch.cuda.memory_reserved())
        return fields


class _Nvml:
    """GPU stats through NVML; silently empty without the library or a driver."""

    def __init__(self) -> None:
        self._nvml: Any = None
        self._handles: list[Any] = []
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handles = [
                pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())
            ]
            self._nvml = pynvml
        except Exception:  # ImportError, NVMLError (no driver): no GPU stats
            self._handles = []

    def read(self) -> list[dict[str, Any]]:
        nvml = self._nvml
        if nvml is None:
            return []
        return [self._one(nvml, index, handle) for index, handle in enumerate(self._handles)]

    @staticmethod
    def _one(nvml: Any, index: int, handle: Any) -> dict[str, Any]:
        def read(fn: Callable[[], Any]) -> Any:
            try:
                return fn()
            except nvml.NVMLError:
                return None

        memory = read(lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        utilization = read(lambda: nvml.nvmlDeviceGetUtilizationRates(handle))
        power_mw = read(lambda: nvml.nvmlDeviceGetPowerUsage(handle))
        name = read(lambda: nvml.nvmlDeviceGetName(handle))
        return {
            "index": index,
            "name": name.decode() if isinstance(name, bytes) else str(name or f"GPU {index}"),
            "utilization": float(utilization.gpu) if utilization is not None else None,
            "memory_used": int(memory.used) if memory is not None else None,
            "memory_total": int(memory.total) if memory is not None else None,
            "temperature": read(
                lambda: float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))
            ),
            "power_watts": power_mw / 1000.0 if power_mw is not None else None,
        }

    def close(self) -> None:
        if self._nvml is not None:
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlShutdown()
            self._nvml = None
