"""Threads that keep the model busy: audio loading ahead of it, the store's writes behind it.

The extraction loop (:func:`extract.runner.run_extraction`) runs three stages at once: a loader
thread decodes a part's audio and forms its batches (:func:`prefetched`), the calling thread runs
the model and copies the states to the host, and a writer thread hands them to the part's writer
(:class:`BackgroundWriter`). Each queue holds at most ``depth`` items, so memory stays bounded: the
part's audio (loaded whole before its first batch, so that the part records every clip it skips),
and ``depth`` batches of host states behind the model (on a GPU with Whisper large-v3, all 34
sites, 16 clips of 10 s: 16 x 500 x 1280 x 2 bytes x 34, about 0.65 GiB a batch in float16).

A part's end, the writer thread's last batches and the part's close (read-back, sync, rename),
runs behind the next part's audio and model (:func:`in_background`): at a part boundary the model
would otherwise wait for both. At most one part is ending while the next is written, so at most
twice the states above are on the host.

Both threads only move work in time: results, their order and every error are those of the
same loop run in one thread. An error in a thread is raised in the calling thread at its next
hand-over (or at the end), and the calling thread's own error stops both threads before it
propagates.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")
_DONE = object()


def prefetched(items: Iterable[T], depth: int = 2) -> Iterator[T]:
    """``items``, produced on a thread up to ``depth`` ahead of the consumer.

    An exception raised while producing is raised here, in order (after the items produced before
    it). Closing the generator early (an error in the consumer) stops the producer at its next item.
    """
    handoff: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                if not _put(handoff, (item, None), stop):
                    return
        except BaseException as error:  # handed to the consumer, raised there
            _put(handoff, (_DONE, error), stop)
            return
        _put(handoff, (_DONE, None), stop)

    thread = threading.Thread(target=produce, name="extract-loader", daemon=True)
    thread.start()
    try:
        while True:
            item, error = handoff.get()
            if error is not None:
                raise error
            if item is _DONE:
                return
            yield item
    finally:
        stop.set()
        thread.join()


def _put(handoff: queue.Queue, item, stop: threading.Event) -> bool:
    """Put ``item`` unless ``stop`` is set first (the consumer has gone); whether it was put."""
    while not stop.is_set():
        try:
            handoff.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


class BackgroundWriter:
    """Runs calls (the part writer's ``add``) in order on one thread, behind a queue of ``depth``.

    :meth:`submit` blocks while the queue is full (the bound on memory) and raises the first error
    a call raised; after an error, the calls still queued are dropped. :meth:`finish` waits for
    every call and raises that error; :meth:`cancel` drops what is queued and waits for the thread.
    """

    def __init__(self, depth: int = 2):
        self.calls: queue.Queue = queue.Queue(maxsize=depth)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="extract-writer", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            call = self.calls.get()
            if call is _DONE:
                return
            if self.error is None:
                try:
                    call()
                except BaseException as error:  # raised in the calling thread
                    self.error = error

    def submit(self, call: Callable[[], object]) -> None:
        self._raise()
        self.calls.put(call)

    def finish(self) -> None:
        self.calls.put(_DONE)
        self.thread.join()
        self._raise()

    def cancel(self) -> None:
        """Drop what is queued and stop the thread (the call it is running finishes first)."""
        self.error = self.error or _Cancelled()
        self.calls.put(_DONE)
        self.thread.join()

    def _raise(self) -> None:
        if self.error is not None and not isinstance(self.error, _Cancelled):
            raise self.error


class _Cancelled(Exception):
    """Marks a writer whose remaining calls were dropped on purpose."""


def in_background(call: Callable[[], T]) -> Future:
    """``call()`` on a thread of its own; its result, or the error it raised, in the returned future."""
    future: Future = Future()
    future.set_running_or_notify_cancel()

    def run() -> None:
        try:
            future.set_result(call())
        except BaseException as error:  # handed to whoever waits on the future
            future.set_exception(error)

    threading.Thread(target=run, name="extract-part-end").start()  # not a daemon: a process that exits mid-end waits for the part to end or be discarded
    return future
