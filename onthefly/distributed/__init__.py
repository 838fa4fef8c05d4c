"""Distributed runs: one dashboard, every rank steered together.

Modules, one job each::

    launch     the native trainer under torchrun: process group, device, DDP wrapper
    sharding   each rank's share of the training data (DistributedSampler, set_epoch)
    group      OnTheFly's own gloo group: its collectives, its timeout, clear errors
    schedule   how many batches pass between two control rounds
    control    RankSync: the control rounds (rank 0 decides, every rank follows)
    mirror     which commands every rank runs, and their copies on the other ranks
    exchange   what every rank sends rank 0 (cursors, per-sample losses)
    cursor     one rank's position in its share of the data
    parity     digests of every tensor, compared across ranks
    replicate  rank 0's model and optimizer state copied to every rank (merges)
    reduce     evaluation losses reduced over the ranks

See ``docs/distributed.md``.
"""
