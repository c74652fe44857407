"""Run a test's work on several threads at once: the one way the tests start threads that must all finish."""

import threading
from typing import Callable


def run_together(n: int, target: Callable[[int], object], timeout: float = 120.0) -> list:
    """Call target(i) for i in range(n), each on its own thread, released together by a barrier so the calls
    overlap; return their results in order of i. The first exception a call raised is raised here (the others
    are chained in its notes); a thread still running after `timeout` seconds fails the test rather than
    leaving it to compare partial results."""
    barrier = threading.Barrier(n)
    results: list = [None] * n
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = target(i)
        except BaseException as e:  # noqa: BLE001 - raised on the caller's thread below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    hung = [i for i, t in enumerate(threads) if t.is_alive()]
    assert not hung, f"threads {hung} of {n} still running after {timeout} s"
    if errors:
        for other in errors[1:]:
            errors[0].add_note(f"another thread raised too: {other!r}")
        raise errors[0]
    return results
