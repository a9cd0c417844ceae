/* SPDX-License-Identifier: GPL-2.0-or-later */
/* rdmafsctl status, daemons and stats. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xprt.h"
#include "ctl_i.h"

static uint64_t now_unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* DRAIN_STATUS of a draining daemon: whether it is removable. -errno on failure. */
static int drained(struct ctl *c, const struct ctl_daemon *d, bool *removable, uint64_t *remaining)
{
	Rdmafs__DrainStatusReq req = RDMAFS__DRAIN_STATUS_REQ__INIT;
	Rdmafs__DrainStatusResp *resp;
	int ret;

	req.uuid.data = (uint8_t *)d->uuid;
	req.uuid.len = RDMAFS_UUID_LEN;
	ret = ctl_meta_call(c, RDMAFS__METHOD__METHOD_DRAIN_STATUS, &req.base,
			    &rdmafs__drain_status_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret)
		return ret;
	*removable = resp->removable;
	*remaining = resp->files_remaining;
	rdmafs__drain_status_resp__free_unpacked(resp, NULL);
	return 0;
}

static void json_addresses(const struct ctl_daemon *d)
{
	ctl_json_begin_array("addresses");
	for (size_t a = 0; a < d->address_count; a++)
		ctl_json_string(NULL, d->addresses[a]);
	ctl_json_end_array();
}

/* ---- health ---- */

/* A disk fuller than this is DEGRADED, and ERROR past the second bound. */
#define NEARLY_FULL_PERCENT 90
#define FULL_PERCENT	    97
#define FULL_FREE_BYTES	    (64ull << 20) /* less free than this is full at any size */
#define HEALTH_MAX_REASONS  8

enum health_level { HEALTH_OK, HEALTH_DEGRADED, HEALTH_ERROR };

static const char *const health_names[] = {"OK", "DEGRADED", "ERROR"};

struct health {
	enum health_level level;
	char reasons[HEALTH_MAX_REASONS][512];
	size_t count;
};

/* What status learns of a draining daemon (DRAIN_STATUS). */
struct drain_info {
	bool removable;
	uint64_t remaining;
};

__attribute__((format(printf, 3, 4))) static void
health_add(struct health *h, enum health_level level, const char *fmt, ...)
{
	va_list ap;

	if (level > h->level)
		h->level = level;
	if (h->count == HEALTH_MAX_REASONS)
		return;
	va_start(ap, fmt);
	vsnprintf(h->reasons[h->count++], sizeof(h->reasons[0]), fmt, ap);
	va_end(ap);
}

/* Appends @name to the ", "-separated list in @buf (cut short with "..."). */
static void list_add(char *buf, size_t len, const char *name)
{
	size_t used = strlen(buf);

	if (used + strlen(name) + 6 >= len) {
		if (used + 4 < len && (used < 3 || strcmp(buf + used - 3, "...") != 0))
			snprintf(buf + used, len - used, "%s...", used ? ", " : "");
		return;
	}
	snprintf(buf + used, len - used, "%s%s", used ? ", " : "", name);
}

/* One file system that daemons share (or one daemon's, without a disk id). */
struct disk_use {
	const char *id;
	uint64_t stored, free_bytes;
	char daemons[256];
};

/*
 * The disks of the daemons that report capacity (not down, not removed),
 * each counted once: what the daemons on it store, and the largest free
 * space any of them reported (their reports differ by the writes between
 * heartbeats). Returns how many are in @out (room for c->map.count).
 */
static size_t disks_of(const struct ctl *c, struct disk_use *out)
{
	size_t n = 0;

	for (size_t i = 0; i < c->map.count; i++) {
		const struct ctl_daemon *d = &c->map.daemons[i];
		uint64_t stored =
			d->used_bytes < d->capacity_bytes ? d->used_bytes : d->capacity_bytes;
		struct disk_use *disk = NULL;

		if (d->state != RDMAFS__DAEMON_STATE__DAEMON_STATE_UP &&
		    d->state != RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING)
			continue;
		for (size_t k = 0; d->disk_id[0] && k < n && !disk; k++)
			if (strcmp(out[k].id, d->disk_id) == 0)
				disk = &out[k];
		if (!disk) {
			disk = &out[n++];
			memset(disk, 0, sizeof(*disk));
			disk->id = d->disk_id;
		}
		disk->stored += stored;
		if (d->capacity_bytes - stored > disk->free_bytes)
			disk->free_bytes = d->capacity_bytes - stored;
		list_add(disk->daemons, sizeof(disk->daemons), d->label);
	}
	return n;
}

static void health_of(const struct ctl *c, const struct drain_info *drain,
		      const struct disk_use *disks, size_t disk_count, struct health *h)
{
	char down[256] = "", draining[256] = "", drained[256] = "", unknown[256] = "";
	char syncing[256] = "", missing[256] = "";
	uint64_t missing_chunks = 0;
	size_t down_count = 0;
	uint64_t remaining = 0;

	memset(h, 0, sizeof(*h));
	if (c->map.count == 0)
		health_add(h, HEALTH_ERROR, "no storage daemon has registered");
	for (size_t i = 0; i < c->map.count; i++) {
		const struct ctl_daemon *d = &c->map.daemons[i];

		if (d->chunks_missing) {
			char one[CTL_MAX_LABEL + 32];

			snprintf(one, sizeof(one), "%s %" PRIu64, d->label, d->chunks_missing);
			list_add(missing, sizeof(missing), one);
			missing_chunks += d->chunks_missing;
		}
		switch (d->state) {
		case RDMAFS__DAEMON_STATE__DAEMON_STATE_UP:
		case RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED:
			break;
		case RDMAFS__DAEMON_STATE__DAEMON_STATE_DOWN:
			list_add(down, sizeof(down), d->label);
			down_count++;
			break;
		case RDMAFS__DAEMON_STATE__DAEMON_STATE_SYNCING:
			list_add(syncing, sizeof(syncing), d->label);
			break;
		case RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING:
			if (drain[i].removable) {
				list_add(drained, sizeof(drained), d->label);
			} else {
				list_add(draining, sizeof(draining), d->label);
				remaining += drain[i].remaining;
			}
			break;
		default:
			list_add(unknown, sizeof(unknown), d->label);
		}
	}
	/* a chunk of one copy on a daemon down cannot be read; replicated files go on */
	if (down_count)
		health_add(
			h, HEALTH_ERROR,
			"%zu of %zu daemons down: %s (files of one copy with chunks on them fail "
			"with EIO until they return; replicated files are under-replicated)",
			down_count, c->map.count, down);
	if (missing_chunks)
		health_add(h, HEALTH_DEGRADED,
			   "under-replicated: %" PRIu64
			   " chunks lack a copy that missed writes (%s); "
			   "each is copied to it when it is back",
			   missing_chunks, missing);
	if (syncing[0])
		health_add(h, HEALTH_DEGRADED,
			   "syncing: %s (back from down: receiving the writes it missed, reading "
			   "no copy until it has them)",
			   syncing);
	if (draining[0])
		health_add(h, HEALTH_DEGRADED, "draining: %s (%" PRIu64 " files still to move)",
			   draining, remaining);
	if (drained[0])
		health_add(h, HEALTH_DEGRADED, "drained, waiting for `rdmafsctl remove`: %s",
			   drained);
	if (unknown[0])
		health_add(h, HEALTH_DEGRADED, "in a state this rdmafsctl does not know: %s",
			   unknown);
	for (size_t k = 0; k < disk_count; k++) {
		const struct disk_use *disk = &disks[k];
		uint64_t cap = disk->stored + disk->free_bytes;
		char free_text[32];

		if (cap == 0)
			continue;
		ctl_fmt_bytes(disk->free_bytes, free_text, sizeof(free_text));
		if (disk->free_bytes < FULL_FREE_BYTES ||
		    disk->free_bytes * 100 < cap * (100 - FULL_PERCENT))
			health_add(h, HEALTH_ERROR, "full: the disk of %s (%s free)", disk->daemons,
				   free_text);
		else if (disk->free_bytes * 100 < cap * (100 - NEARLY_FULL_PERCENT))
			health_add(h, HEALTH_DEGRADED, "nearly full: the disk of %s (%s free)",
				   disk->daemons, free_text);
	}
}

static const char *role_of(const struct ctl_daemon *d)
{
	return d->hosts_metadata ? "meta+data" : "data";
}

static void status_json(const struct ctl *c, const struct health *h, const struct drain_info *drain,
			uint64_t stored, uint64_t capacity, size_t disk_count, uint64_t now)
{
	ctl_json_begin_object(NULL);
	ctl_json_begin_object("health");
	ctl_json_string("status", health_names[h->level]);
	ctl_json_begin_array("reasons");
	for (size_t i = 0; i < h->count; i++)
		ctl_json_string(NULL, h->reasons[i]);
	ctl_json_end_array();
	ctl_json_end_object();
	ctl_json_string("cluster_id", c->map.cluster_id);
	ctl_json_string("metadata_service", c->meta_uri);
	ctl_json_u64("epoch", c->map.epoch);
	ctl_json_u64("stored_bytes", stored);
	ctl_json_u64("capacity_bytes", capacity);
	ctl_json_u64("disks", disk_count);
	ctl_json_begin_array("daemons");
	for (size_t i = 0; i < c->map.count; i++) {
		const struct ctl_daemon *d = &c->map.daemons[i];

		ctl_json_begin_object(NULL);
		ctl_json_string("uuid", d->uuid_text);
		ctl_json_string("name", d->name);
		ctl_json_string("role", role_of(d));
		ctl_json_bool("hosts_metadata", d->hosts_metadata);
		ctl_json_string("state", ctl_state_name(d->state));
		if (d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING) {
			ctl_json_bool("drained", drain[i].removable);
			ctl_json_u64("files_remaining", drain[i].remaining);
		}
		json_addresses(d);
		ctl_json_string("disk_id", d->disk_id);
		ctl_json_string("host", d->host);
		ctl_json_string("rack", d->rack);
		ctl_json_u64("capacity_bytes", d->capacity_bytes);
		ctl_json_u64("used_bytes", d->used_bytes);
		ctl_json_u64("last_heartbeat_unix_ms", d->last_heartbeat_unix_ms);
		ctl_json_u64("chunks_missing", d->chunks_missing);
		if (d->last_heartbeat_unix_ms)
			ctl_json_u64("heartbeat_age_ms", now > d->last_heartbeat_unix_ms
								 ? now - d->last_heartbeat_unix_ms
								 : 0);
		else
			ctl_json_null("heartbeat_age_ms");
		ctl_json_end_object();
	}
	ctl_json_end_array();
	ctl_json_end_object();
	ctl_json_finish();
}

static void status_text(const struct ctl *c, const struct health *h, const struct drain_info *drain,
			uint64_t stored, uint64_t capacity, size_t disk_count, uint64_t now)
{
	size_t up = 0, name_width = 4;
	char a[32], b[32];

	printf("health: %s\n", health_names[h->level]);
	for (size_t i = 0; i < h->count; i++)
		printf("  %s\n", h->reasons[i]);
	for (size_t i = 0; i < c->map.count; i++) {
		up += c->map.daemons[i].state == RDMAFS__DAEMON_STATE__DAEMON_STATE_UP;
		if (strlen(c->map.daemons[i].label) > name_width)
			name_width = strlen(c->map.daemons[i].label);
	}
	printf("cluster %s, metadata service %s, map epoch %" PRIu64 ": %zu daemons, %zu up\n",
	       c->map.cluster_id[0] ? c->map.cluster_id : "(no id)", c->meta_uri, c->map.epoch,
	       c->map.count, up);
	printf("stored %s of %s on %zu disk%s (daemons sharing a disk count it once)\n\n",
	       ctl_fmt_bytes(stored, a, sizeof(a)), ctl_fmt_bytes(capacity, b, sizeof(b)),
	       disk_count, disk_count == 1 ? "" : "s");
	printf("%-*s  %-9s  %-9s  %10s  %10s  %10s  %-8s  %s\n", (int)name_width, "NAME", "ROLE",
	       "STATE", "STORED", "CAPACITY", "HEARTBEAT", "UUID", "ADDRESS");
	for (size_t i = 0; i < c->map.count; i++) {
		const struct ctl_daemon *d = &c->map.daemons[i];
		bool draining = d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING;
		char hb[32];

		if (d->last_heartbeat_unix_ms)
			snprintf(hb, sizeof(hb), "%.1fs ago",
				 (double)(now > d->last_heartbeat_unix_ms
						  ? now - d->last_heartbeat_unix_ms
						  : 0) /
					 1000);
		else
			snprintf(hb, sizeof(hb), "never");
		printf("%-*s  %-9s  %-9s  %10s  %10s  %10s  %.8s  %s\n", (int)name_width, d->label,
		       role_of(d),
		       draining && drain[i].removable ? "drained" : ctl_state_name(d->state),
		       ctl_fmt_bytes(d->used_bytes, a, sizeof(a)),
		       ctl_fmt_bytes(d->capacity_bytes, b, sizeof(b)), hb, d->uuid_text,
		       d->address_count ? d->addresses[0] : "-");
		if (draining && !drain[i].removable)
			printf("%-*s  (%" PRIu64 " files still to move: rdmafsctl drain %s)\n",
			       (int)name_width, "", drain[i].remaining, d->label);
		if (d->host[0] || d->rack[0])
			printf("%-*s  (%s%s%s%s%s: copies of a chunk never share %s)\n",
			       (int)name_width, "", d->host[0] ? "host " : "", d->host,
			       d->host[0] && d->rack[0] ? ", " : "", d->rack[0] ? "rack " : "",
			       d->rack, d->rack[0] ? "a rack" : "a host");
	}
}

int ctl_cmd_status(struct ctl *c, int argc, char **argv)
{
	uint64_t now = now_unix_ms(), stored = 0, capacity = 0;
	struct drain_info *drain = NULL;
	struct disk_use *disks = NULL;
	size_t disk_count;
	struct health h;
	int ret = ctl_map_load(c, false);

	if (ret)
		return ctl_exit_for(ret);
	drain = calloc(c->map.count + 1, sizeof(*drain));
	disks = calloc(c->map.count + 1, sizeof(*disks));
	if (!drain || !disks) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < c->map.count; i++) {
		if (c->map.daemons[i].state != RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING)
			continue;
		ret = drained(c, &c->map.daemons[i], &drain[i].removable, &drain[i].remaining);
		if (ret)
			goto out;
	}
	disk_count = disks_of(c, disks);
	for (size_t k = 0; k < disk_count; k++) {
		stored += disks[k].stored;
		capacity += disks[k].stored + disks[k].free_bytes;
	}
	health_of(c, drain, disks, disk_count, &h);
	if (c->json)
		status_json(c, &h, drain, stored, capacity, disk_count, now);
	else
		status_text(c, &h, drain, stored, capacity, disk_count, now);
out:
	free(drain);
	free(disks);
	if (ret)
		return ctl_exit_for(ret);
	return h.level == HEALTH_OK	    ? CTL_EXIT_OK
	       : h.level == HEALTH_DEGRADED ? CTL_EXIT_PROBLEMS
					    : CTL_EXIT_UNHEALTHY;
}

int ctl_cmd_daemons(struct ctl *c, int argc, char **argv)
{
	size_t name_width = 4;
	int ret = ctl_map_load(c, false);

	if (ret)
		return ctl_exit_for(ret);
	for (size_t i = 0; i < c->map.count; i++)
		if (strlen(c->map.daemons[i].label) > name_width)
			name_width = strlen(c->map.daemons[i].label);
	if (c->json) {
		ctl_json_begin_object(NULL);
		ctl_json_u64("epoch", c->map.epoch);
		ctl_json_begin_array("daemons");
	} else {
		printf("%-*s  %-36s  %-9s  %s\n", (int)name_width, "NAME", "UUID", "STATE",
		       "ADDRESSES");
	}
	for (size_t i = 0; i < c->map.count; i++) {
		const struct ctl_daemon *d = &c->map.daemons[i];

		if (c->json) {
			ctl_json_begin_object(NULL);
			ctl_json_string("uuid", d->uuid_text);
			ctl_json_string("name", d->name);
			ctl_json_string("state", ctl_state_name(d->state));
			json_addresses(d);
			ctl_json_end_object();
			continue;
		}
		printf("%-*s  %-36s  %-9s ", (int)name_width, d->label, d->uuid_text,
		       ctl_state_name(d->state));
		for (size_t a = 0; a < d->address_count; a++)
			printf(" %s", d->addresses[a]);
		printf("%s\n", d->address_count ? "" : " -");
	}
	if (c->json) {
		ctl_json_end_array();
		ctl_json_end_object();
		ctl_json_finish();
	}
	return CTL_EXIT_OK;
}

/* ---- stats ---- */

/* rdmafs_method_name(), and "other" for what the daemon could not tell apart. */
static void method_name(uint32_t method, char *out, size_t len)
{
	if (method == RDMAFS__METHOD__METHOD_UNSPECIFIED)
		snprintf(out, len, "other");
	else
		rdmafs_method_name(method, out, len);
}

/*
 * The latency below which fraction @p of the calls fell, as the upper bound
 * of the histogram bucket that holds it. -1: in the last, unbounded bucket
 * (slower than every bound). -2: no calls, or a histogram we cannot read.
 */
static int64_t percentile(const Rdmafs__DaemonStatsResp *s, const Rdmafs__OpStats *op, double p)
{
	uint64_t total = 0, seen = 0, target;

	if (op->n_latency_buckets != s->n_latency_bounds_us + 1)
		return -2;
	for (size_t i = 0; i < op->n_latency_buckets; i++) {
		if (op->latency_buckets[i] > UINT64_MAX - total)
			return -2;
		total += op->latency_buckets[i];
	}
	if (total == 0)
		return -2;
	target = (uint64_t)(p * (double)total);
	if (target == 0)
		target = 1;
	for (size_t i = 0; i < op->n_latency_buckets; i++) {
		seen += op->latency_buckets[i];
		if (seen >= target)
			return i < s->n_latency_bounds_us ? (int64_t)s->latency_bounds_us[i] : -1;
	}
	return -1;
}

static bool bounds_ascending(const Rdmafs__DaemonStatsResp *s)
{
	for (size_t i = 1; i < s->n_latency_bounds_us; i++)
		if (s->latency_bounds_us[i] <= s->latency_bounds_us[i - 1])
			return false;
	return s->n_latency_bounds_us > 0;
}

static const double percentiles[] = {0.50, 0.90, 0.99};
static const char *const percentile_keys[] = {"p50", "p90", "p99"};

static void fmt_latency(int64_t us, const Rdmafs__DaemonStatsResp *s, char *out, size_t len)
{
	if (us == -2)
		snprintf(out, len, "-");
	else if (us == -1)
		snprintf(out, len, ">%" PRIu64 "ms",
			 s->latency_bounds_us[s->n_latency_bounds_us - 1] / 1000);
	else if (us >= 1000)
		snprintf(out, len, "<=%" PRId64 "ms", us / 1000);
	else
		snprintf(out, len, "<=%" PRId64 "us", us);
}

static void print_stats(const struct ctl_daemon *d, const Rdmafs__DaemonStatsResp *s)
{
	double up = s->uptime_sec ? (double)s->uptime_sec : 1.0;
	bool hist = bounds_ascending(s);
	char a[32], b[32], lat[3][32], name[48];

	printf("daemon %s  %s  version %s  up %" PRIu64 " s\n", d->uuid_text,
	       d->address_count ? d->addresses[0] : "-", s->version, s->uptime_sec);
	printf("  chunks %" PRIu64 "  capacity %s  free %s  connections %u  in flight %u\n",
	       s->chunks, ctl_fmt_bytes(s->capacity_bytes, a, sizeof(a)),
	       ctl_fmt_bytes(s->free_bytes, b, sizeof(b)), s->connections, s->requests_in_flight);
	printf("  read %s (%.1f KiB/s)", ctl_fmt_bytes(s->bytes_read, a, sizeof(a)),
	       (double)s->bytes_read / up / 1024);
	printf("  written %s (%.1f KiB/s), averaged over the uptime\n",
	       ctl_fmt_bytes(s->bytes_written, b, sizeof(b)), (double)s->bytes_written / up / 1024);
	printf("  errors %" PRIu64 "  checksum errors %" PRIu64 "  inline writes %" PRIu64
	       "  inline reads %" PRIu64 "\n",
	       s->errors, s->checksum_errors, s->inline_writes, s->inline_reads);
	printf("  run on receipt %" PRIu64 " (handed on to a worker %" PRIu64
	       ", cold blocks fetched there %" PRIu64 ")\n",
	       s->run_on_receipt, s->handed_on, s->fetched);
	printf("  commits at close deferred %" PRIu64 "  data flushes %" PRIu64
	       "  failed flushes %" PRIu64 "\n",
	       s->commits_deferred, s->data_flushes, s->data_flush_errors);
	printf("  %-16s %10s %8s %10s %9s %9s %9s\n", "OP", "COUNT", "ERRORS", "BYTES", "p50",
	       "p90", "p99");
	for (size_t i = 0; i < s->n_ops; i++) {
		const Rdmafs__OpStats *op = s->ops[i];

		if (!op || op->count == 0)
			continue;
		method_name((uint32_t)op->method, name, sizeof(name));
		for (int p = 0; p < 3; p++)
			fmt_latency(hist ? percentile(s, op, percentiles[p]) : -2, s, lat[p],
				    sizeof(lat[p]));
		printf("  %-16s %10" PRIu64 " %8" PRIu64 " %10s %9s %9s %9s\n", name, op->count,
		       op->errors, ctl_fmt_bytes(op->bytes, a, sizeof(a)), lat[0], lat[1], lat[2]);
	}
	printf("\n");
}

static void json_stats(const struct ctl_daemon *d, const Rdmafs__DaemonStatsResp *s)
{
	double up = s->uptime_sec ? (double)s->uptime_sec : 1.0;
	bool hist = bounds_ascending(s);
	uint64_t total = 0;
	char name[48];

	ctl_json_string("version", s->version);
	ctl_json_u64("uptime_sec", s->uptime_sec);
	ctl_json_u64("chunks", s->chunks);
	ctl_json_u64("capacity_bytes", s->capacity_bytes);
	ctl_json_u64("free_bytes", s->free_bytes);
	ctl_json_u64("bytes_read", s->bytes_read);
	ctl_json_u64("bytes_written", s->bytes_written);
	ctl_json_double("read_bytes_per_sec", (double)s->bytes_read / up);
	ctl_json_double("write_bytes_per_sec", (double)s->bytes_written / up);
	ctl_json_u64("errors", s->errors);
	ctl_json_u64("checksum_errors", s->checksum_errors);
	ctl_json_u64("connections", s->connections);
	ctl_json_u64("requests_in_flight", s->requests_in_flight);
	ctl_json_u64("inline_writes", s->inline_writes);
	ctl_json_u64("inline_reads", s->inline_reads);
	ctl_json_u64("run_on_receipt", s->run_on_receipt);
	ctl_json_u64("handed_on", s->handed_on);
	ctl_json_u64("fetched", s->fetched);
	ctl_json_u64("pending_reads", s->pending_reads);
	ctl_json_u64("commits_deferred", s->commits_deferred);
	ctl_json_u64("data_flushes", s->data_flushes);
	ctl_json_u64("data_flush_errors", s->data_flush_errors);
	ctl_json_begin_array("latency_bounds_us");
	for (size_t i = 0; i < s->n_latency_bounds_us; i++)
		ctl_json_u64(NULL, s->latency_bounds_us[i]);
	ctl_json_end_array();
	ctl_json_begin_array("ops");
	for (size_t i = 0; i < s->n_ops; i++) {
		const Rdmafs__OpStats *op = s->ops[i];

		if (!op)
			continue;
		total += op->count;
		method_name((uint32_t)op->method, name, sizeof(name));
		ctl_json_begin_object(NULL);
		ctl_json_string("method", name);
		ctl_json_u64("count", op->count);
		ctl_json_u64("errors", op->errors);
		ctl_json_u64("bytes", op->bytes);
		ctl_json_begin_object("latency_us");
		for (int p = 0; p < 3; p++) {
			int64_t us = hist ? percentile(s, op, percentiles[p]) : -2;

			/* null: no calls, or slower than the last bound */
			if (us < 0)
				ctl_json_null(percentile_keys[p]);
			else
				ctl_json_u64(percentile_keys[p], (uint64_t)us);
		}
		ctl_json_end_object();
		ctl_json_begin_array("latency_buckets");
		for (size_t b = 0; b < op->n_latency_buckets; b++)
			ctl_json_u64(NULL, op->latency_buckets[b]);
		ctl_json_end_array();
		ctl_json_end_object();
	}
	ctl_json_end_array();
	ctl_json_u64("ops_total", total);
}

int ctl_cmd_stats(struct ctl *c, int argc, char **argv)
{
	struct ctl_daemon *one = NULL;
	int ret, status = CTL_EXIT_OK;

	ret = ctl_map_load(c, false);
	if (ret)
		return ctl_exit_for(ret);
	if (argc == 1) {
		ret = ctl_resolve(c, argv[0], &one);
		if (ret)
			return ret == -ENOENT || ret == -EINVAL ? CTL_EXIT_USAGE
								: ctl_exit_for(ret);
	}
	if (c->json) {
		ctl_json_begin_object(NULL);
		ctl_json_begin_array("daemons");
	}
	for (size_t i = 0; i < c->map.count; i++) {
		struct ctl_daemon *d = &c->map.daemons[i];
		Rdmafs__DaemonStatsReq req = RDMAFS__DAEMON_STATS_REQ__INIT;
		Rdmafs__DaemonStatsResp *resp = NULL;
		struct rfs_daemon *handle;

		if (one ? d != one : d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED)
			continue;
		ret = ctl_daemon(c, d, &handle);
		if (!ret)
			ret = rfs_daemon_call(handle, RDMAFS__METHOD__METHOD_DAEMON_STATS,
					      &req.base, &rdmafs__daemon_stats_resp__descriptor,
					      (ProtobufCMessage **)&resp);
		if (c->json) {
			ctl_json_begin_object(NULL);
			ctl_json_string("uuid", d->uuid_text);
			ctl_json_string("state", ctl_state_name(d->state));
			json_addresses(d);
		}
		if (ret) {
			ctl_report_daemon_error(d, ret);
			if (ctl_exit_for(ret) > status)
				status = ctl_exit_for(ret);
			if (c->json) {
				ctl_json_string("error", ctl_daemon_strerror(d, ret));
				ctl_json_end_object();
			}
			continue;
		}
		if (c->json) {
			json_stats(d, resp);
			ctl_json_end_object();
		} else {
			print_stats(d, resp);
		}
		rdmafs__daemon_stats_resp__free_unpacked(resp, NULL);
	}
	if (c->json) {
		ctl_json_end_array();
		ctl_json_end_object();
		ctl_json_finish();
	}
	return status;
}
