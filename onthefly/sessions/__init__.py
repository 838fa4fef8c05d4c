"""Session files (``.otf``): export, resume bit for bit, safe loading, the checkpoint ring.

Modules, one job each::

    manifest        the pydantic Manifest (format version, versions, run, step, epoch)
    archive         the zip: atomic writing, bounded and code-free reading
    payload         what a session file holds and how it is written
    training_state  the trainer's state under either driver, and loading it at a pause
    rng             capture/restore of Python, NumPy, torch CPU and CUDA generators
    data_position   where the training loader stands, and recreating that position
    loaders         wrapping the training loaders of either driver
    resume          continuing a run from a file in a new process
    ring            the checkpoint ring in the session's temporary folder
    view            serving an exported session's history, read-only

Only ``manifest`` and ``archive`` can be imported without torch (``onthefly inspect``).
"""
