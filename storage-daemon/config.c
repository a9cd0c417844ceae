/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Configuration: an INI file (inih) and command-line flags; a flag wins over
 * the file. Every key is known and checked: a typo is an error, not a
 * silently ignored line.
 *
 *   [daemon]
 *   data_dir = /var/lib/rdmafs
 *   listen = rdma://0.0.0.0:7471      ; repeatable
 *   listen = tcp://0.0.0.0:7471
 *   secret_file = /etc/rdmafs/secret
 *   name = storage-1
 *   host = server-7                   ; failure domains: two copies of a chunk never share
 *   rack = rack-2                     ; a rack, or where no rack is declared, a host
 *   workers = 4
 *   meta_workers = 64                 ; metadata requests' threads (metadata = yes); 0: workers'
 *   reclaim_grace = 30                ; s clients have to reclaim open handles after a restart
 *   replicas = 1                      ; copies of each chunk of a new file (1..4; a directory's
 *                                     ; rdmafs.replicas xattr says otherwise for its files)
 *   metadata_sync = batch             ; always: each commit on disk before its answer
 *   metadata_sync_ms = 1000           ; batch: a commit is on disk within this (10..60000)
 *   data_sync = batch                 ; always: a close's commit on disk before its answer
 *   data_sync_ms = 1000               ; batch: a close's commit is on disk within this
 *   queue_depth = 256
 *   busy_poll_us = 100                ; poll this long before sleeping (verbs, tcp)
 *   max_chunk_size = 1048576          ; multiple of 4096, 4 KiB .. 64 MiB
 *   lmdb_map_size = 1073741824
 *   log_level = info                  ; debug, info, warning, error
 *   metadata = yes                    ; host the metadata service (one daemon per cluster)
 *   metadata_uri = tcp://meta1:7471   ; register there instead (needed with metadata = no)
 *   advertise = rdma://10.0.0.2:7471  ; repeatable: addresses clients use (default: listen)
 *   port_file = /run/rdmafs/daemon/port
 *   metrics_listen = 127.0.0.1:9471  ; Prometheus /metrics (HOST:PORT, port 0: any); empty: off
 *   metrics_port_file = /run/rdmafs/daemon/metrics-port
 *
 * Every error names where the setting came from ("daemon.conf:12: workers =
 * 0: must be 1..64", or the flag) and what is allowed, and all of them are
 * reported before the daemon gives up. Which daemon hosts the metadata
 * service is decided here: metadata_uri names another service, so it means
 * metadata = no; metadata = yes together with metadata_uri is refused, as
 * either reading could be what the operator meant.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/socket.h>

#include <ini.h>

#include "xprt.h"
#include "daemon_i.h"

#define MAX_CHUNK_LIMIT (64u << 20)
/* Room for the reason a value is refused. */
#define WHY_MAX 160

static const struct option longopts[] = {
	{"config", required_argument, NULL, 'c'},
	{"check-config", no_argument, NULL, 'C'},
	{"data-dir", required_argument, NULL, 'd'},
	{"listen", required_argument, NULL, 'l'},
	{"secret-file", required_argument, NULL, 's'},
	{"port-file", required_argument, NULL, 'p'},
	{"name", required_argument, NULL, 'n'},
	{"host", required_argument, NULL, 'H'},
	{"rack", required_argument, NULL, 'K'},
	{"workers", required_argument, NULL, 'w'},
	{"reclaim-grace", required_argument, NULL, 'R'},
	{"log-level", required_argument, NULL, 'L'},
	{"foreground", no_argument, NULL, 'f'},
	{"metadata", required_argument, NULL, 'M'},
	{"metadata-uri", required_argument, NULL, 'U'},
	{"advertise", required_argument, NULL, 'A'},
	{"metrics-listen", required_argument, NULL, 'm'},
	{"metrics-port-file", required_argument, NULL, 'P'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

/* The flag that sets config key @key ("data_dir" -> "data-dir"), for messages. */
static const char *flag_name(const char *key, char *buf, size_t size)
{
	snprintf(buf, size, "%s", key);
	for (char *p = buf; *p; p++)
		if (*p == '_')
			*p = '-';
	return buf;
}

/*
 * Prints one error about a setting: "FILE:LINE: key = value: why" for a
 * setting of the file (@line > 0), "rdmafs-daemon: --key value: why" for a flag.
 */
__attribute__((format(printf, 5, 6))) static void setting_error(const char *path, unsigned line,
								const char *key, const char *value,
								const char *fmt, ...)
{
	char flag[32];
	va_list ap;

	if (line)
		fprintf(stderr, "%s:%u: %s = %s: ", path, line, key, value);
	else
		fprintf(stderr, "rdmafs-daemon: --%s %s: ", flag_name(key, flag, sizeof(flag)),
			value);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!*text || *text == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(text, &end, 0);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int set_string(char **slot, const char *value)
{
	char *copy = strdup(value);

	if (!copy)
		return -ENOMEM;
	free(*slot);
	*slot = copy;
	return 0;
}

/*
 * A URI as the transport reads it. A listener may ask for port 0 (any free
 * port); an address others connect to may not.
 */
static int check_uri(const char *uri, bool port_zero_ok, char *why, size_t why_size)
{
	enum xprt_kind kind;
	char host[256];
	uint16_t port;

	if (xprt_uri_parse(uri, &kind, host, sizeof(host), &port) || (!port_zero_ok && !port)) {
		snprintf(why, why_size, "must be rdma://, tcp:// or auto://HOST:PORT with PORT %s",
			 port_zero_ok ? "0..65535 (0: any free port)" : "1..65535");
		return -EINVAL;
	}
	return 0;
}

int config_split_host_port(const char *value, char *host, size_t host_size, uint16_t *port,
			   char *why, size_t why_size)
{
	enum xprt_kind kind;

	/* the transport's parser reads a bare HOST:PORT, brackets for IPv6 included */
	if (strstr(value, "://") || xprt_uri_parse(value, &kind, host, host_size, port)) {
		snprintf(why, why_size,
			 "must be HOST:PORT ([ADDR]:PORT for IPv6) with PORT 0..65535 (0: any "
			 "free port), or empty for no metrics");
		return -EINVAL;
	}
	return 0;
}

/*
 * Checks @uri and appends it to a list of at most DAEMON_MAX_LISTEN
 * addresses, remembering the file line it came from (0: a flag).
 */
static int add_uri(char **list, unsigned *lines, unsigned *count, const char *uri, unsigned line,
		   bool port_zero_ok, char *why, size_t why_size)
{
	int ret = check_uri(uri, port_zero_ok, why, why_size);

	if (ret)
		return ret;
	if (*count >= DAEMON_MAX_LISTEN) {
		snprintf(why, why_size, "at most %u such addresses", DAEMON_MAX_LISTEN);
		return -EINVAL;
	}
	list[*count] = strdup(uri);
	if (!list[*count])
		return -ENOMEM;
	lines[*count] = line;
	(*count)++;
	return 0;
}

static int parse_bool(const char *text, int *out)
{
	static const char *const yes[] = {"yes", "true", "on", "1"};
	static const char *const no[] = {"no", "false", "off", "0"};

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(text, yes[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcasecmp(text, no[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	return -EINVAL;
}

/* A number in [@min, @max]; else -EINVAL and the range in @why. */
static int parse_range(const char *value, uint64_t min, uint64_t max, uint64_t *out, char *why,
		       size_t why_size)
{
	int ret = parse_u64(value, min, max, out);

	if (ret)
		snprintf(why, why_size, "must be %llu..%llu", (unsigned long long)min,
			 (unsigned long long)max);
	return ret;
}

/* "always" or "batch", for metadata_sync and data_sync. */
static int parse_sync(const char *value, bool *always, char *why, size_t why_size)
{
	if (strcmp(value, "always") != 0 && strcmp(value, "batch") != 0) {
		snprintf(why, why_size, "must be always or batch");
		return -EINVAL;
	}
	*always = strcmp(value, "always") == 0;
	return 0;
}

static bool name_ok(const char *name)
{
	size_t len = strlen(name);

	for (size_t i = 0; i < len; i++)
		if (name[i] < 0x21 || name[i] > 0x7e)
			return false;
	return len <= DAEMON_NAME_MAX;
}

/*
 * One key, from the file (@line > 0) or a flag (@line 0). Returns 0, -ENOENT
 * for an unknown key, -ENOMEM, or -EINVAL with what is allowed in @why.
 */
static int config_set(struct daemon_config *cfg, const char *key, const char *value, unsigned line,
		      char *why, size_t why_size)
{
	static const char *const strings[] = {"data_dir", "secret_file", "port_file",	     "name",
					      "host",	  "rack",	 "metrics_port_file"};
	char **const string_slots[] = {
		&cfg->data_dir, &cfg->secret_file, &cfg->port_file,	   &cfg->name,
		&cfg->host,	&cfg->rack,	   &cfg->metrics_port_file};
	char host[256];
	uint16_t port;
	uint64_t v;
	int ret = 0;

	for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++) {
		if (strcmp(key, strings[i]) != 0)
			continue;
		if (!*value) {
			snprintf(why, why_size, "must not be empty");
			return -EINVAL;
		}
		if (string_slots[i] == &cfg->name && !name_ok(value)) {
			snprintf(why, why_size,
				 "must be 1..%d printable characters without spaces (it names the "
				 "daemon in rdmafsctl status)",
				 DAEMON_NAME_MAX);
			return -EINVAL;
		}
		if ((string_slots[i] == &cfg->host || string_slots[i] == &cfg->rack) &&
		    !name_ok(value)) {
			snprintf(why, why_size,
				 "must be 1..%d printable characters without spaces (daemons that "
				 "give one %s never hold two copies of a chunk)",
				 DAEMON_NAME_MAX, key);
			return -EINVAL;
		}
		return set_string(string_slots[i], value);
	}
	if (strcmp(key, "listen") == 0) {
		ret = add_uri(cfg->listen, cfg->listen_line, &cfg->listen_count, value, line, true,
			      why, why_size);
	} else if (strcmp(key, "advertise") == 0) {
		ret = add_uri(cfg->advertise, cfg->advertise_line, &cfg->advertise_count, value,
			      line, false, why, why_size);
	} else if (strcmp(key, "metadata_uri") == 0) {
		ret = check_uri(value, false, why, why_size);
		if (!ret)
			ret = set_string(&cfg->metadata_uri, value);
		if (!ret)
			cfg->metadata_uri_line = line;
	} else if (strcmp(key, "metrics_listen") == 0) {
		/* empty: off (a flag can so turn off what the file set) */
		ret = *value ? config_split_host_port(value, host, sizeof(host), &port, why,
						      why_size)
			     : 0;
		if (!ret)
			ret = set_string(&cfg->metrics_listen, value);
		if (!ret)
			cfg->metrics_line = line;
	} else if (strcmp(key, "workers") == 0) {
		ret = parse_range(value, 1, 64, &v, why, why_size);
		if (!ret)
			cfg->workers = (unsigned)v;
	} else if (strcmp(key, "meta_workers") == 0) {
		ret = parse_range(value, 0, 256, &v, why, why_size);
		if (!ret)
			cfg->meta_workers = (unsigned)v;
	} else if (strcmp(key, "reclaim_grace") == 0) {
		ret = parse_range(value, 1, 3600, &v, why, why_size);
		if (!ret)
			cfg->reclaim_grace_sec = (unsigned)v;
	} else if (strcmp(key, "replicas") == 0) {
		ret = parse_range(value, 1, RDMAFS_MAX_REPLICAS, &v, why, why_size);
		if (!ret)
			cfg->replicas = (unsigned)v;
	} else if (strcmp(key, "metadata_sync") == 0) {
		ret = parse_sync(value, &cfg->metadata_sync_always, why, why_size);
	} else if (strcmp(key, "metadata_sync_ms") == 0) {
		ret = parse_range(value, 10, 60000, &v, why, why_size);
		if (!ret)
			cfg->metadata_sync_ms = (unsigned)v;
	} else if (strcmp(key, "data_sync") == 0) {
		ret = parse_sync(value, &cfg->data_sync_always, why, why_size);
	} else if (strcmp(key, "data_sync_ms") == 0) {
		ret = parse_range(value, 10, 60000, &v, why, why_size);
		if (!ret)
			cfg->data_sync_ms = (unsigned)v;
	} else if (strcmp(key, "queue_depth") == 0) {
		ret = parse_range(value, 1, 65536, &v, why, why_size);
		if (!ret)
			cfg->queue_depth = (unsigned)v;
	} else if (strcmp(key, "busy_poll_us") == 0) {
		ret = parse_range(value, 0, XPRT_BUSY_POLL_MAX_US, &v, why, why_size);
		if (!ret)
			cfg->busy_poll_us = (int)v;
	} else if (strcmp(key, "max_chunk_size") == 0) {
		ret = parse_u64(value, STORE_BLOCK_SIZE, MAX_CHUNK_LIMIT, &v);
		if (ret || v % STORE_BLOCK_SIZE) {
			snprintf(why, why_size, "must be a multiple of %u in %u..%u (64 MiB)",
				 STORE_BLOCK_SIZE, STORE_BLOCK_SIZE, MAX_CHUNK_LIMIT);
			return -EINVAL;
		}
		cfg->max_chunk_size = (uint32_t)v;
	} else if (strcmp(key, "lmdb_map_size") == 0) {
		ret = parse_range(value, 1u << 20, 1ull << 40, &cfg->lmdb_map_size, why, why_size);
		if (ret)
			snprintf(why, why_size, "must be %u..%llu (1 MiB..1 TiB)", 1u << 20,
				 1ull << 40);
	} else if (strcmp(key, "log_level") == 0) {
		ret = rdmafs_log_parse_level(value, &cfg->log_level);
		if (ret)
			snprintf(why, why_size, "must be debug, info, warning or error");
	} else if (strcmp(key, "metadata") == 0) {
		ret = parse_bool(value, &cfg->metadata);
		if (ret)
			snprintf(why, why_size, "must be yes or no (true/false, on/off, 1/0)");
		else
			cfg->metadata_line = line;
	} else {
		return -ENOENT;
	}
	return ret;
}

struct ini_state {
	struct daemon_config *cfg;
	FILE *f;
	const char *path;
	unsigned line; /* the line inih is on: it counts one per call of the reader */
	bool failed;
};

__attribute__((format(printf, 2, 3))) static void line_error(struct ini_state *st, const char *fmt,
							     ...)
{
	va_list ap;

	fprintf(stderr, "%s:%u: ", st->path, st->line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	st->failed = true;
}

/*
 * inih's reader, as fgets(), that counts lines. inih handles a line before it
 * reads the next, so while the handler runs st->line is the line of its key
 * (the handler of Debian's libinih gets no line number: it is built without
 * INI_HANDLER_LINENO). A line longer than inih's buffer would come back as
 * several lines; its rest is dropped and the line refused instead.
 */
static char *config_ini_read(char *str, int num, void *stream)
{
	struct ini_state *st = stream;
	size_t len;
	int c;

	if (!fgets(str, num, st->f))
		return NULL;
	st->line++;
	len = strlen(str);
	if (len + 1 == (size_t)num && str[len - 1] != '\n') {
		c = getc(st->f);
		if (c != '\n' && c != EOF) {
			while (c != '\n' && c != EOF)
				c = getc(st->f);
			line_error(st, "line longer than %d characters", num - 2);
			/* inih sees an empty line: nothing of a cut line may set a key */
			snprintf(str, (size_t)num, "\n");
		}
	}
	return str;
}

static int config_ini_cb(void *user, const char *section, const char *name, const char *value)
{
	struct ini_state *st = user;
	char why[WHY_MAX];
	int ret;

	if (!*section) {
		line_error(st, "'%s' comes before any section: put it under [daemon]", name);
		return 1;
	}
	if (strcmp(section, "daemon") != 0) {
		line_error(st, "'%s' is in unknown section [%s] (only [daemon] is known)", name,
			   section);
		return 1;
	}
	ret = config_set(st->cfg, name, value, st->line, why, sizeof(why));
	if (ret == -ENOENT)
		line_error(st, "unknown key '%s' in [daemon]", name);
	else if (ret == -ENOMEM)
		line_error(st, "out of memory");
	else if (ret)
		setting_error(st->path, st->line, name, value, "%s", why);
	if (ret)
		st->failed = true;
	return 1; /* keep going: report every bad line at once */
}

int config_parse_file(struct daemon_config *cfg, FILE *f, const char *path)
{
	struct ini_state st = {.cfg = cfg, .f = f, .path = path};
	int line = ini_parse_stream(config_ini_read, &st, config_ini_cb, &st);

	if (line > 0) {
		/* inih names only its first syntax error */
		fprintf(stderr, "%s:%d: syntax error: want key = value, [section] or a comment\n",
			path, line);
		st.failed = true;
	} else if (line < 0) {
		fprintf(stderr, "%s: out of memory\n", path);
		st.failed = true;
	}
	return st.failed ? -EINVAL : 0;
}

static int load_file(struct daemon_config *cfg, const char *path)
{
	FILE *f = fopen(path, "r");
	int ret;

	if (!f) {
		fprintf(stderr, "rdmafs-daemon: cannot open config file %s: %s\n", path,
			strerror(errno));
		return -EINVAL;
	}
	ret = config_parse_file(cfg, f, path);
	fclose(f);
	return ret;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: rdmafs-daemon [--config FILE] [--data-dir DIR] [--listen URI]...\n"
		"                     [--secret-file FILE] [--port-file FILE] [--name NAME]\n"
		"                     [--host NAME] [--rack NAME]\n"
		"                     [--workers N] [--log-level LEVEL] [--foreground]\n"
		"                     [--metadata yes|no] [--metadata-uri URI] [--advertise "
		"URI]...\n"
		"                     [--metrics-listen HOST:PORT] [--metrics-port-file FILE]\n"
		"                     [--reclaim-grace SECS]\n"
		"       rdmafs-daemon --check-config [FILE] [flags as above]\n"
		"       rdmafs-daemon --help | --version\n"
		"  URI: rdma://host:port, tcp://host:port or auto://host:port (port 0: any)\n"
		"  --port-file: write the first listener's port there once serving\n"
		"  --metadata: host the metadata service (default: yes without metadata-uri,\n"
		"              no with it; yes together with --metadata-uri is an error)\n"
		"  --metadata-uri: the metadata service to register with (default: this daemon)\n"
		"  --advertise: an address clients use for this daemon (default: the listeners)\n"
		"  --host, --rack: this daemon's failure domains: two copies of a chunk of a\n"
		"              file made later are never in one rack, nor, where no rack is\n"
		"              given, on one host (default: neither; each daemon its own)\n"
		"  --metrics-listen: serve Prometheus metrics at http://HOST:PORT/metrics\n"
		"              (port 0: any free port; empty: off, the default)\n"
		"  --metrics-port-file: write the metrics port there once serving\n"
		"  --reclaim-grace: seconds clients have to reclaim open handles after the\n"
		"              metadata service starts (1..3600, default 30)\n"
		"  --check-config: check the configuration (FILE, as --config, and the flags),\n"
		"              the secret file and the data directory; start nothing, create\n"
		"              nothing, bind no port; print 'FILE: OK' or every error\n"
		"  --version, -V: print 'rdmafs-daemon VERSION' and exit\n"
		"  The daemon never forks; --foreground is accepted for scripts.\n"
		"  Exit status: 0 stopped cleanly (--check-config: the configuration is valid),\n"
		"  1 refused to start (--check-config: errors found; each one is printed).\n");
}

void config_free(struct daemon_config *cfg)
{
	free(cfg->config_file);
	free(cfg->data_dir);
	for (unsigned i = 0; i < cfg->listen_count; i++)
		free(cfg->listen[i]);
	free(cfg->secret_file);
	free(cfg->port_file);
	free(cfg->name);
	free(cfg->host);
	free(cfg->rack);
	free(cfg->metadata_uri);
	for (unsigned i = 0; i < cfg->advertise_count; i++)
		free(cfg->advertise[i]);
	free(cfg->metrics_listen);
	free(cfg->metrics_port_file);
	memset(cfg, 0, sizeof(*cfg));
}

/* Moves the list @from (flags) over @to (the file's), which it replaces. */
static void take_list(char **to, unsigned *to_lines, unsigned *to_count, char **from,
		      unsigned *from_lines, unsigned *from_count)
{
	if (!*from_count)
		return;
	for (unsigned i = 0; i < *to_count; i++)
		free(to[i]);
	memcpy(to, from, sizeof(*to) * DAEMON_MAX_LISTEN);
	memcpy(to_lines, from_lines, sizeof(*to_lines) * DAEMON_MAX_LISTEN);
	*to_count = *from_count;
	*from_count = 0;
}

/* Moves the string @from (a flag) over @to when the flag was given. */
static void take_string(char **to, char **from)
{
	if (!*from)
		return;
	free(*to);
	*to = *from;
	*from = NULL;
}

/*
 * Which daemon hosts the metadata service: metadata_uri alone means no (it
 * names the service this daemon registers with), neither means yes (the
 * single-node default), metadata = yes with metadata_uri is refused.
 */
static int decide_metadata(struct daemon_config *cfg)
{
	const char *path = cfg->config_file;
	char flag[32];

	if (cfg->metadata == 1 && cfg->metadata_uri) {
		if (cfg->metadata_line)
			fprintf(stderr, "%s:%u: metadata = yes", path, cfg->metadata_line);
		else
			fprintf(stderr, "rdmafs-daemon: --metadata yes");
		if (cfg->metadata_uri_line)
			fprintf(stderr, " conflicts with metadata_uri = %s (%s:%u)",
				cfg->metadata_uri, path, cfg->metadata_uri_line);
		else
			fprintf(stderr, " conflicts with --%s %s",
				flag_name("metadata_uri", flag, sizeof(flag)), cfg->metadata_uri);
		fprintf(stderr,
			": a daemon that hosts the metadata service registers with its own; "
			"set metadata = no to register with %s, or remove metadata_uri to host "
			"the service here\n",
			cfg->metadata_uri);
		return -EINVAL;
	}
	if (cfg->metadata < 0)
		cfg->metadata = cfg->metadata_uri ? 0 : 1;
	if (!cfg->metadata && !cfg->metadata_uri) {
		fprintf(stderr, "rdmafs-daemon: without the metadata service (metadata = no) the "
				"daemon needs metadata_uri: the service to register with\n");
		return -EINVAL;
	}
	return 0;
}

int config_load(struct daemon_config *cfg, int argc, char **argv)
{
	struct daemon_config flags = {0};
	bool log_level_flag = false;
	unsigned errors = 0;
	char why[WHY_MAX];
	const char *key;
	int opt, ret;

	memset(cfg, 0, sizeof(*cfg));
	cfg->workers = 4;
	cfg->meta_workers = 64;
	cfg->reclaim_grace_sec = 30;
	cfg->metadata_sync_ms = 1000;
	cfg->data_sync_ms = 1000;
	cfg->queue_depth = 256;
	cfg->busy_poll_us = -1;
	cfg->max_chunk_size = 1u << 20;
	cfg->lmdb_map_size = 1ull << 30;
	cfg->log_level = RDMAFS_LOG_INFO;
	cfg->metadata = -1;

	/* Flags go to their own config first so they can override the file. */
	flags.log_level = RDMAFS_LOG_INFO;
	flags.metadata = -1;
	while ((opt = getopt_long(argc, argv, "c:d:l:s:p:n:H:K:w:L:fhVM:U:A:m:P:R:", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'c':
			ret = set_string(&flags.config_file, optarg);
			if (ret)
				goto err_free_flags;
			continue;
		case 'C':
			cfg->check_only = true;
			continue;
		case 'f':
			flags.foreground = true;
			continue;
		case 'h':
			usage(stdout);
			ret = 1;
			goto err_free_flags;
		case 'V':
			printf("rdmafs-daemon %s\n", RDMAFS_VERSION);
			ret = 1;
			goto err_free_flags;
		case '?':
			usage(stderr);
			ret = -EINVAL;
			goto err_free_flags;
		default:
			key = opt == 'd'   ? "data_dir"
			      : opt == 'l' ? "listen"
			      : opt == 's' ? "secret_file"
			      : opt == 'p' ? "port_file"
			      : opt == 'n' ? "name"
			      : opt == 'H' ? "host"
			      : opt == 'K' ? "rack"
			      : opt == 'w' ? "workers"
			      : opt == 'M' ? "metadata"
			      : opt == 'U' ? "metadata_uri"
			      : opt == 'A' ? "advertise"
			      : opt == 'm' ? "metrics_listen"
			      : opt == 'P' ? "metrics_port_file"
			      : opt == 'R' ? "reclaim_grace"
					   : "log_level";
			ret = config_set(&flags, key, optarg, 0, why, sizeof(why));
			if (ret == -ENOMEM)
				goto err_free_flags;
			if (ret) {
				setting_error(NULL, 0, key, optarg, "%s", why);
				errors++;
			}
			log_level_flag |= opt == 'L';
			break;
		}
	}
	/* rdmafs-daemon --check-config FILE: the file may come without --config */
	if (cfg->check_only && !flags.config_file && optind + 1 == argc) {
		ret = set_string(&flags.config_file, argv[optind++]);
		if (ret)
			goto err_free_flags;
	}
	if (optind < argc) {
		fprintf(stderr, "rdmafs-daemon: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		ret = -EINVAL;
		goto err_free_flags;
	}
	if (flags.config_file) {
		cfg->config_file = flags.config_file;
		flags.config_file = NULL;
		if (load_file(cfg, cfg->config_file))
			errors++;
	}
	/* Flags override the file. */
	take_string(&cfg->data_dir, &flags.data_dir);
	take_list(cfg->listen, cfg->listen_line, &cfg->listen_count, flags.listen,
		  flags.listen_line, &flags.listen_count);
	take_string(&cfg->secret_file, &flags.secret_file);
	take_string(&cfg->port_file, &flags.port_file);
	take_string(&cfg->name, &flags.name);
	take_string(&cfg->host, &flags.host);
	take_string(&cfg->rack, &flags.rack);
	if (flags.workers)
		cfg->workers = flags.workers;
	if (flags.reclaim_grace_sec)
		cfg->reclaim_grace_sec = flags.reclaim_grace_sec;
	if (flags.metadata >= 0) {
		cfg->metadata = flags.metadata;
		cfg->metadata_line = 0;
	}
	if (flags.metadata_uri) {
		take_string(&cfg->metadata_uri, &flags.metadata_uri);
		cfg->metadata_uri_line = 0;
	}
	take_list(cfg->advertise, cfg->advertise_line, &cfg->advertise_count, flags.advertise,
		  flags.advertise_line, &flags.advertise_count);
	if (flags.metrics_listen) {
		take_string(&cfg->metrics_listen, &flags.metrics_listen);
		cfg->metrics_line = 0;
	}
	take_string(&cfg->metrics_port_file, &flags.metrics_port_file);
	if (log_level_flag)
		cfg->log_level = flags.log_level;
	cfg->foreground = flags.foreground;

	if (!cfg->data_dir) {
		fprintf(stderr, "rdmafs-daemon: no data directory: set data_dir or --data-dir\n");
		errors++;
	}
	if (!cfg->listen_count) {
		fprintf(stderr, "rdmafs-daemon: nothing to listen on: set listen or --listen\n");
		errors++;
	}
	if (!cfg->secret_file) {
		fprintf(stderr,
			"rdmafs-daemon: no cluster secret: set secret_file or --secret-file\n");
		errors++;
	}
	if (decide_metadata(cfg))
		errors++;
	config_free(&flags);
	return errors ? -EINVAL : 0;

err_free_flags:
	config_free(&flags);
	return ret;
}

/* Why bind() failed, in an operator's words. */
static const char *bind_hint(int err)
{
	switch (err) {
	case EADDRINUSE:
		return " (another program, or another rdmafs-daemon, listens there)";
	case EADDRNOTAVAIL:
		return " (no interface of this host has that address)";
	case EACCES:
		return " (a port below 1024 needs CAP_NET_BIND_SERVICE)";
	default:
		return "";
	}
}

/*
 * Resolves @host and, with @try_bind, binds and closes a TCP socket on it
 * and @port; a failure is an error about the setting @key = @value of file
 * line @line (0: a flag). @prefer_v4: bind an IPv4 address if it has one,
 * as the verbs backend does; else the first, as the tcp backend and the
 * metrics server do.
 */
static int check_address(const struct daemon_config *cfg, const char *key, const char *value,
			 unsigned line, const char *host, uint16_t port, bool prefer_v4,
			 bool try_bind)
{
	const struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				       .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	const struct addrinfo *ai;
	struct addrinfo *res;
	char service[8];
	int fd, one = 1, ret;

	snprintf(service, sizeof(service), "%u", port);
	/* as the transports resolve it: "*" is the wildcard */
	ret = getaddrinfo(strcmp(host, "*") == 0 ? NULL : host, service, &hints, &res);
	if (ret) {
		setting_error(cfg->config_file, line, key, value, "cannot resolve %s: %s", host,
			      ret == EAI_SYSTEM ? strerror(errno) : gai_strerror(ret));
		return -EINVAL;
	}
	if (!try_bind) {
		freeaddrinfo(res);
		return 0;
	}
	ai = res;
	for (const struct addrinfo *a = res; prefer_v4 && a; a = a->ai_next) {
		if (a->ai_family == AF_INET) {
			ai = a;
			break;
		}
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ret = 0;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen)) {
		int err = errno;

		setting_error(cfg->config_file, line, key, value, "cannot bind: %s%s",
			      strerror(err), bind_hint(err));
		ret = -EINVAL;
	}
	if (fd >= 0)
		close(fd);
	freeaddrinfo(res);
	return ret;
}

int config_check_listen(const struct daemon_config *cfg, bool try_bind)
{
	unsigned errors = 0;
	enum xprt_kind kind;
	char host[256], why[WHY_MAX];
	uint16_t port;

	for (unsigned i = 0; i < cfg->listen_count; i++) {
		if (xprt_uri_parse(cfg->listen[i], &kind, host, sizeof(host), &port)) {
			/* config_set() let it through */
			setting_error(cfg->config_file, cfg->listen_line[i], "listen",
				      cfg->listen[i], "not a URI");
			errors++;
			continue;
		}
		if (check_address(cfg, "listen", cfg->listen[i], cfg->listen_line[i], host, port,
				  kind == XPRT_KIND_VERBS, try_bind))
			errors++;
	}
	if (cfg->metrics_listen && *cfg->metrics_listen) {
		if (config_split_host_port(cfg->metrics_listen, host, sizeof(host), &port, why,
					   sizeof(why))) {
			setting_error(cfg->config_file, cfg->metrics_line, "metrics_listen",
				      cfg->metrics_listen, "%s", why);
			errors++;
		} else if (check_address(cfg, "metrics_listen", cfg->metrics_listen,
					 cfg->metrics_line, host, port, false, try_bind)) {
			errors++;
		}
	}
	return errors ? -EINVAL : 0;
}
