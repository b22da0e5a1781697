/* SPDX-License-Identifier: Apache-2.0 */
/* The base every part of the library includes: errors, messages, fault
 * injection and small utilities. Nothing here is exported from the shared
 * library. */
#ifndef SSEG_INTERNAL_H
#define SSEG_INTERNAL_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "fault.h"
#include "log.h"
#include "sharedseg.h"
#include "util.h"

#endif
