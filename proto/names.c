// SPDX-License-Identifier: GPL-2.0-or-later
/* rdmafs.proto's enums by name; see rdmafs_names.h. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "rdmafs.pb-c.h"
#include "rdmafs_names.h"

const char *rdmafs_daemon_state_name(uint32_t state)
{
	switch (state) {
	case RDMAFS__DAEMON_STATE__DAEMON_STATE_UP:
		return "up";
	case RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN:
		return "down";
	case RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING:
		return "draining";
	case RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED:
		return "removed";
	case RDMAFS__DAEMON_STATE__DAEMON_STATE_SYNCING:
		return "syncing";
	default:
		return "unknown";
	}
}

const char *rdmafs_method_name(uint32_t method, char *out, size_t len)
{
	const ProtobufCEnumValue *v =
		protobuf_c_enum_descriptor_get_value(&rdmafs__method__descriptor, (int)method);
	const char *name = v ? v->name : NULL;
	size_t i = 0;

	if (!name) {
		snprintf(out, len, "method_%u", method);
		return out;
	}
	if (strncmp(name, "METHOD_", 7) == 0)
		name += 7;
	for (; name[i] && i + 1 < len; i++)
		out[i] = (char)tolower((unsigned char)name[i]);
	out[i] = '\0';
	return out;
}
