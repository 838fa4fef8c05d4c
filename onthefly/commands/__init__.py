"""Commands that act on the model, run on the training thread at a batch boundary.

:mod:`~onthefly.commands.registry` routes a command to the handler its feature registered;
:mod:`~onthefly.commands.interrupts` lets a long command (a scan, a fork, a merge) be
cancelled between its batches.
"""
