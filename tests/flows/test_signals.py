"""SIGTERM and SIGHUP end a process that holds the Java VM as Ctrl-C does: a real VM, a real signal."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.conftest import REPO

# a process whose main thread is in and out of JNI calls all the time, as a search-holding stage's is; the VM
# starts inside the block, as a stage's retriever starts it inside `searchlab run`'s
HOLDS_THE_VM = textwrap.dedent("""
    import sys
    from flows.signals import Terminated, ending_on_signals
    from searchlab.retrieval.jvm import autoclass, start_jvm

    try:
        with ending_on_signals():
            start_jvm()
            thread = autoclass("java.lang.Thread")
            print("ready", flush=True)
            while True:
                thread.sleep(20)
    except Terminated as err:
        print(f"terminated by {err}", flush=True)
        sys.exit(err.exit_status)
""")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_ends_a_process_in_the_java_vm_with_its_exit_status(signum):
    proc = subprocess.Popen([sys.executable, "-c", HOLDS_THE_VM], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.5)  # well inside the loop of JNI calls
    sent = time.perf_counter()
    proc.send_signal(signum)
    status = proc.wait(timeout=10)
    assert time.perf_counter() - sent < 10
    assert status == 128 + signum, proc.stdout.read()
    assert f"terminated by {signal.Signals(signum).name}" in proc.stdout.read()
