"""A new loader like the user's: what is carried over, what the caller chooses."""

from __future__ import annotations

import multiprocessing

import torch
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler, Subset, TensorDataset

from onthefly.dataloaders import loader_like, release_workers
from tests.loaders import collate, configured_loader, init_worker


def _data(n: int = 10) -> TensorDataset:
    return TensorDataset(torch.arange(n))


def _batches(loader: DataLoader) -> list[list[int]]:
    return [x.tolist() for (x,) in loader]


def test_the_user_s_loading_settings_are_carried_over() -> None:
    parent = configured_loader(_data())
    loader = loader_like(parent)
    assert loader.dataset is parent.dataset
    assert (loader.batch_size, loader.drop_last, loader.num_workers) == (3, True, 2)
    assert loader.collate_fn is collate and loader.pin_memory
    assert (loader.timeout, loader.prefetch_factor) == (7, 3)
    assert loader.worker_init_fn is init_worker
    assert loader.multiprocessing_context is parent.multiprocessing_context is not None
    # Chosen by the caller, not carried over: order, generator, persistent workers, in_order.
    assert isinstance(loader.sampler, SequentialSampler)
    assert loader.generator is None and not loader.persistent_workers and loader.in_order


def test_what_is_loaded_can_be_changed() -> None:
    parent = configured_loader(_data())
    subset = Subset(parent.dataset, [1, 2])
    loader = loader_like(parent, dataset=subset, batch_size=2, drop_last=False, shuffle=True)
    assert loader.dataset is subset and (loader.batch_size, loader.drop_last) == (2, False)
    assert isinstance(loader.sampler, RandomSampler)
    sampler = SequentialSampler(range(4))
    assert loader_like(parent, sampler=sampler).sampler is sampler


def test_the_parent_s_generator_persistent_workers_and_order_are_taken_when_asked() -> None:
    parent = configured_loader(_data())
    loader = loader_like(
        parent, shuffle=True, generator=parent.generator, persistent_workers=True, in_order=False
    )
    assert isinstance(loader.sampler, RandomSampler)
    assert loader.generator is loader.sampler.generator is parent.generator
    assert loader.persistent_workers and not loader.in_order


def test_the_loader_yields_the_chosen_batches() -> None:
    parent = DataLoader(_data(), batch_size=4, shuffle=True)
    assert _batches(loader_like(parent)) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    subset = loader_like(parent, dataset=Subset(parent.dataset, [9, 3, 5]), batch_size=2)
    assert _batches(subset) == [[9, 3], [5]]
    assert _batches(loader_like(parent, drop_last=True)) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_a_given_batch_sampler_draws_the_batches() -> None:
    parent = DataLoader(_data(), batch_size=4, drop_last=True, collate_fn=collate)
    batches = [[7, 1], [4], [0, 2, 9]]
    loader = loader_like(parent, batch_sampler=batches)
    assert loader.batch_sampler is batches and loader.batch_size is None
    assert loader.collate_fn is collate  # the rest is carried over as always
    assert _batches(loader) == batches


def test_workers_only_options_are_dropped_without_workers() -> None:
    parent = configured_loader(_data(), pin_memory=False)
    parent.num_workers = 0  # lowered after it was built: it still holds the workers' options
    loader = loader_like(parent, persistent_workers=True)
    assert loader.num_workers == 0 and loader.timeout == 0 and loader.prefetch_factor is None
    assert loader.worker_init_fn is None and loader.multiprocessing_context is None
    assert not loader.persistent_workers
    assert _batches(loader) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]


def test_release_workers_stops_an_iterator_s_workers_now() -> None:
    loader = DataLoader(_data(40), batch_size=4, num_workers=2)
    batches = iter(loader)
    next(batches)
    assert len(multiprocessing.active_children()) == 2
    release_workers(batches, loader)
    assert multiprocessing.active_children() == []
    release_workers(batches, loader)  # again: nothing left to stop
    release_workers(iter(range(3)), [1, 2])  # not a DataLoader's: ignored


def test_release_workers_drops_a_persistent_iterator_so_the_next_pass_works() -> None:
    loader = DataLoader(_data(8), batch_size=4, num_workers=2, persistent_workers=True)
    batches = iter(loader)
    next(batches)
    release_workers(batches, loader)
    assert multiprocessing.active_children() == [] and loader._iterator is None
    assert _batches(loader) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    release_workers(loader._iterator, loader)
