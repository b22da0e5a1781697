# SPDX-License-Identifier: Apache-2.0
"""python -m sharedseg probe|demo|bench|ls|keep"""
import sys

from .cli import main

sys.exit(main())
