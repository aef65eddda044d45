"""What every callback of one console shares: its settings, the job manager, and the catalogs.

Nothing here belongs to a browser session. Catalog scans are cached because model folders rarely
change; the Rescan button refreshes them.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from core.run.launcher import DeviceSlots

from app.auth.access import NOBODY, SINGLE_USER, Viewer, viewer_for
from app.data.catalog import ModelEntry, scan_models
from app.runs.cluster import ClusterOffer, ClusterOffers
from app.data.datasets import Dataset, scan_datasets
from app.runs.devices import detect
from app.runs.exports import BackgroundExports, prepare_adapter
from app.runs.jobs import JobManager
from app.charts.metrics import SharedCharts
from app.paths import for_config
from app.runs.serving import Endpoints
from app.settings import Settings


def device_slots(settings: Settings) -> DeviceSlots:
    """What this machine runs at once: the accelerator ids found (app/runs/devices.py) and the
    console's --max-concurrent-runs."""
    found = detect()
    ids = {name: tuple(range(info.count)) for name, info in found.items() if name != "cpu" and info.found}
    return DeviceSlots(ids, settings.max_concurrent_runs)


@dataclass
class Console:
    settings: Settings
    jobs: JobManager
    exports: BackgroundExports = field(default_factory=BackgroundExports)
    endpoints: Endpoints = field(default_factory=Endpoints)  # the Serve action's processes (app/runs/serving.py)
    charts: SharedCharts = field(default_factory=SharedCharts)  # the Monitor pages' live charts, one per run
    _models: list[ModelEntry] | None = field(default=None, repr=False)
    cluster: ClusterOffers | None = field(default=None, repr=False)  # Slurm's partitions, asked lazily
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def create(cls, settings: Settings, **job_options) -> Console:
        exports = BackgroundExports()
        job_options.setdefault("on_end", lambda run: prepare_adapter(exports, run.path, settings.runs_dir))
        job_options.setdefault("slots", device_slots(settings))
        return cls(settings, JobManager(settings.runs_dir, **job_options), exports)

    def models(self, refresh: bool = False) -> list[ModelEntry]:
        with self._lock:
            if self._models is None or refresh:
                self._models = scan_models(self.settings.models_dirs)
            return list(self._models)

    def cluster_offer(self, refresh: bool = False) -> ClusterOffer:
        """The Slurm partitions the Train tab may offer, or why none (cached; see app/runs/cluster.py)."""
        with self._lock:
            if self.cluster is None:
                self.cluster = ClusterOffers(self.settings.runs_dir, self.settings.cluster_shared_dir)
        return self.cluster.get(refresh)

    def viewer(self, request) -> Viewer:
        """Who is behind a Gradio request (gr.Request, or the raw request a server function gets)."""
        return viewer_for(self.settings, request)

    @property
    def page_viewer(self) -> Viewer:
        """Whose runs the page may show before a request says who is looking: every run on a
        console without logins, none with logins (the page fills in per user when it loads)."""
        return NOBODY if self.settings.auth else SINGLE_USER

    def datasets(self) -> list[Dataset]:
        """Scanned on each call: uploads appear at once, and a data root holds few folders."""
        return scan_datasets(self.settings.all_data_dirs)

    @property
    def runs_dir(self) -> Path:
        return self.settings.runs_dir

    @property
    def runs_dir_for_config(self) -> str:
        return for_config(self.settings.runs_dir)
