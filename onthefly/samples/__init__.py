"""Per-sample loss: capture during training, attribution, store, scans, selections, export.

The :class:`~onthefly.callbacks.sample_tracker.SampleTracker` callback wires these parts
into a run; each module here has one job:

* :mod:`~onthefly.samples.capture` — per-sample losses from the training step's own loss call;
* :mod:`~onthefly.samples.loss_spec` — how a loss function reduces, and its per-sample call;
* :mod:`~onthefly.samples.slot` — where a training batch's values are reported (the loss tap);
* :mod:`~onthefly.samples.loss_mode` — the functional losses a training step calls;
* :mod:`~onthefly.samples.attribution` — the dataset index of every sample of a batch;
* :mod:`~onthefly.samples.buffer` — device values shipped to the host in batches;
* :mod:`~onthefly.samples.store` — O(dataset) running statistics per sample;
* :mod:`~onthefly.samples.history` — the full history, as Parquet files;
* :mod:`~onthefly.samples.scan` — a full pass over a split with the current model;
* :mod:`~onthefly.samples.selection` / :mod:`~onthefly.samples.clustering` — mining;
* :mod:`~onthefly.samples.export` / :mod:`~onthefly.samples.explorer` — files and 2-D maps.
"""
