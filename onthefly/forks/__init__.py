"""Forks and merges: specialists trained on hard slices, and ways to merge them back.

The merge arithmetic is plain PyTorch on models, one module per method:

* :mod:`~onthefly.forks.soup` — uniform soup / SWA with BatchNorm recomputed, greedy soup;
* :mod:`~onthefly.forks.fisher` — diagonal Fisher and Fisher-weighted averaging;
* :mod:`~onthefly.forks.distill` — distillation of specialists into the parent;
* :mod:`~onthefly.forks.adapters` — low-rank adapters on Linear layers, folded back.

These never touch a run: each takes models and batches and returns a new model
(distillation trains the student it is given). The other modules of the package train
forks and apply merges to a live run; ``docs/forks.md`` describes both.
"""
