# SPDX-License-Identifier: Apache-2.0
"""What the machine cannot do is errno.EOPNOTSUPP from Python too, the same
for backend="cuda", backend="ascend" and host registration when no driver
is installed (each in its own interpreter: a driver is loaded once per
process)."""
import errno
import subprocess
import sys

from conftest import env_with_package

SCRIPT = '''
import errno
import sharedseg
blocks = {"k": dict(count=2, shape=(4, 8), dtype="uint8")}
for kwargs in (dict(backend="cuda"), dict(backend="ascend"),
               dict(pages="base", host_register=True, device_id=0)):
    try:
        sharedseg.create_shared_segment("py-no-driver", blocks, **kwargs)
        print("created", kwargs)
    except sharedseg.SharedSegmentError as e:
        print(errno.errorcode.get(e.errno, e.errno), e)
'''


def test_no_driver_is_eopnotsupp_everywhere():
    env = env_with_package(SHAREDSEG_CUDA_LIBRARY="/nonexistent/libcuda.so.1",
                           SHAREDSEG_ACL_LIBRARY="/nonexistent/libascendcl.so")
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3, lines
    for line, driver in zip(lines, ("no CUDA driver", "no ACL runtime", "no CUDA driver")):
        assert line.startswith(errno.errorcode[errno.EOPNOTSUPP] + " "), line
        assert driver in line, line
