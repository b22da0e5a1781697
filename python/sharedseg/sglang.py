# SPDX-License-Identifier: Apache-2.0
"""SGLang's HiCache host pool in one sharedseg segment per attention-TP
group: the module SGLang's plugin entry point names
(sharedseg.sglang:plugin), with install()/uninstall() for Python and
`python -m sharedseg.sglang --check`. The adapter is
sharedseg.engines.sglang.plugin; this module is its documented name."""
import sys

if __name__ == "__main__":
    # Before this copy imports SGLang: the check imports the adapter once,
    # with SGLang's import-time warnings kept off its report.
    from sharedseg.engines.sglang.check import main
    sys.exit(main())

from .engines.sglang import ENGINE, USERS  # noqa: E402
from .engines.sglang.plugin import (SERVED, SWITCH, SharedSegHostTensorAllocator,  # noqa: E402
                                    check_version, install, installed, plugin, refused,
                                    switch_request, uninstall)

__all__ = ["plugin", "install", "uninstall", "installed", "SharedSegHostTensorAllocator",
           "ENGINE", "SWITCH", "SERVED", "USERS", "check_version", "refused", "switch_request"]
