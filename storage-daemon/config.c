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
 *   workers = 4
 *   queue_depth = 256
 *   max_chunk_size = 1048576          ; multiple of 4096, 4 KiB .. 64 MiB
 *   lmdb_map_size = 1073741824
 *   log_level = info                  ; err, warn, info, debug
 *   metadata = yes                    ; host the metadata service (one daemon per cluster)
 *   metadata_uri = tcp://meta1:7471   ; register there instead (needed with metadata = no)
 *   advertise = rdma://10.0.0.2:7471  ; repeatable: addresses clients use (default: listen)
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ini.h>

#include "daemon_i.h"

#define MAX_CHUNK_LIMIT (64u << 20)

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

/* Appends @uri to a list of at most DAEMON_MAX_LISTEN addresses. */
static int add_uri(char **list, unsigned *count, const char *what, const char *uri)
{
	if (*count >= DAEMON_MAX_LISTEN) {
		fprintf(stderr, "rdmafs-daemon: at most %u %s addresses\n", DAEMON_MAX_LISTEN,
			what);
		return -EINVAL;
	}
	list[*count] = strdup(uri);
	if (!list[*count])
		return -ENOMEM;
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

/* One key: shared by the INI handler and the flags. Returns 0 or -EINVAL. */
static int config_set(struct daemon_config *cfg, const char *key, const char *value)
{
	uint64_t v;
	int ret = 0;

	if (strcmp(key, "data_dir") == 0) {
		ret = set_string(&cfg->data_dir, value);
	} else if (strcmp(key, "listen") == 0) {
		ret = add_uri(cfg->listen, &cfg->listen_count, "listen", value);
	} else if (strcmp(key, "secret_file") == 0) {
		ret = set_string(&cfg->secret_file, value);
	} else if (strcmp(key, "port_file") == 0) {
		ret = set_string(&cfg->port_file, value);
	} else if (strcmp(key, "name") == 0) {
		ret = set_string(&cfg->name, value);
	} else if (strcmp(key, "workers") == 0) {
		ret = parse_u64(value, 1, 64, &v);
		cfg->workers = (unsigned)v;
	} else if (strcmp(key, "queue_depth") == 0) {
		ret = parse_u64(value, 1, 65536, &v);
		cfg->queue_depth = (unsigned)v;
	} else if (strcmp(key, "max_chunk_size") == 0) {
		ret = parse_u64(value, STORE_BLOCK_SIZE, MAX_CHUNK_LIMIT, &v);
		if (!ret && v % STORE_BLOCK_SIZE)
			ret = -EINVAL;
		cfg->max_chunk_size = (uint32_t)v;
	} else if (strcmp(key, "lmdb_map_size") == 0) {
		ret = parse_u64(value, 1u << 20, 1ull << 40, &cfg->lmdb_map_size);
	} else if (strcmp(key, "log_level") == 0) {
		ret = rdmafs_log_parse_level(value, &cfg->log_level);
	} else if (strcmp(key, "metadata") == 0) {
		ret = parse_bool(value, &cfg->metadata);
	} else if (strcmp(key, "metadata_uri") == 0) {
		ret = set_string(&cfg->metadata_uri, value);
	} else if (strcmp(key, "advertise") == 0) {
		ret = add_uri(cfg->advertise, &cfg->advertise_count, "advertise", value);
	} else {
		return -ENOENT;
	}
	return ret;
}

struct ini_state {
	struct daemon_config *cfg;
	const char *path;
	bool failed;
};

static int config_ini_cb(void *user, const char *section, const char *name, const char *value)
{
	struct ini_state *st = user;
	int ret;

	if (strcmp(section, "daemon") != 0) {
		fprintf(stderr, "%s: unknown section [%s] (only [daemon] is known)\n", st->path,
			section);
		st->failed = true;
		return 1;
	}
	ret = config_set(st->cfg, name, value);
	if (ret == -ENOENT)
		fprintf(stderr, "%s: unknown key '%s' in [daemon]\n", st->path, name);
	else if (ret)
		fprintf(stderr, "%s: bad value '%s' for '%s'\n", st->path, value, name);
	if (ret)
		st->failed = true;
	return 1; /* keep going: report every bad line at once */
}

int config_parse_file(struct daemon_config *cfg, FILE *f, const char *path)
{
	struct ini_state st = {.cfg = cfg, .path = path};
	int line = ini_parse_file(f, config_ini_cb, &st);

	if (line > 0) {
		fprintf(stderr, "%s:%d: syntax error\n", path, line);
		return -EINVAL;
	}
	if (line < 0 || st.failed) {
		fprintf(stderr, "rdmafs-daemon: config file %s refused\n", path);
		return -EINVAL;
	}
	return 0;
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
		"                     [--workers N] [--log-level LEVEL] [--foreground]\n"
		"                     [--metadata yes|no] [--metadata-uri URI] [--advertise "
		"URI]...\n"
		"  URI: rdma://host:port, tcp://host:port or auto://host:port (port 0: any)\n"
		"  --port-file: write the first listener's port there once serving\n"
		"  --metadata: host the metadata service (default yes; one daemon per cluster)\n"
		"  --metadata-uri: the metadata service to register with (default: this daemon)\n"
		"  --advertise: an address clients use for this daemon (default: the listeners)\n"
		"  The daemon never forks; --foreground is accepted for scripts.\n");
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
	free(cfg->metadata_uri);
	for (unsigned i = 0; i < cfg->advertise_count; i++)
		free(cfg->advertise[i]);
	memset(cfg, 0, sizeof(*cfg));
}

int config_load(struct daemon_config *cfg, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"config", required_argument, NULL, 'c'},
		{"data-dir", required_argument, NULL, 'd'},
		{"listen", required_argument, NULL, 'l'},
		{"secret-file", required_argument, NULL, 's'},
		{"port-file", required_argument, NULL, 'p'},
		{"name", required_argument, NULL, 'n'},
		{"workers", required_argument, NULL, 'w'},
		{"log-level", required_argument, NULL, 'L'},
		{"foreground", no_argument, NULL, 'f'},
		{"metadata", required_argument, NULL, 'M'},
		{"metadata-uri", required_argument, NULL, 'U'},
		{"advertise", required_argument, NULL, 'A'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct daemon_config flags = {0};
	bool log_level_flag = false;
	const char *key;
	int opt, ret = -EINVAL;

	memset(cfg, 0, sizeof(*cfg));
	cfg->workers = 4;
	cfg->queue_depth = 256;
	cfg->max_chunk_size = 1u << 20;
	cfg->lmdb_map_size = 1ull << 30;
	cfg->log_level = RDMAFS_LOG_INFO;
	cfg->metadata = -1;

	/* Flags go to their own config first so they can override the file. */
	flags.log_level = RDMAFS_LOG_INFO;
	flags.metadata = -1;
	while ((opt = getopt_long(argc, argv, "c:d:l:s:p:n:w:L:fhM:U:A:", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			ret = set_string(&flags.config_file, optarg);
			break;
		case 'f':
			flags.foreground = true;
			continue;
		case 'h':
			usage(stdout);
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
			      : opt == 'w' ? "workers"
			      : opt == 'M' ? "metadata"
			      : opt == 'U' ? "metadata_uri"
			      : opt == 'A' ? "advertise"
					   : "log_level";
			ret = config_set(&flags, key, optarg);
			log_level_flag |= opt == 'L';
			if (ret)
				fprintf(stderr, "rdmafs-daemon: bad value '%s' for %s\n", optarg,
					key);
			break;
		}
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
		ret = load_file(cfg, flags.config_file);
		if (ret)
			goto err_free_cfg;
		cfg->config_file = flags.config_file;
		flags.config_file = NULL;
	}
	/* Flags override the file. */
	if (flags.data_dir) {
		free(cfg->data_dir);
		cfg->data_dir = flags.data_dir;
		flags.data_dir = NULL;
	}
	if (flags.listen_count) {
		for (unsigned i = 0; i < cfg->listen_count; i++)
			free(cfg->listen[i]);
		memcpy(cfg->listen, flags.listen, sizeof(cfg->listen));
		cfg->listen_count = flags.listen_count;
		flags.listen_count = 0;
	}
	if (flags.secret_file) {
		free(cfg->secret_file);
		cfg->secret_file = flags.secret_file;
		flags.secret_file = NULL;
	}
	if (flags.port_file) {
		free(cfg->port_file);
		cfg->port_file = flags.port_file;
		flags.port_file = NULL;
	}
	if (flags.name) {
		free(cfg->name);
		cfg->name = flags.name;
		flags.name = NULL;
	}
	if (flags.workers)
		cfg->workers = flags.workers;
	if (flags.metadata >= 0)
		cfg->metadata = flags.metadata;
	if (cfg->metadata < 0)
		cfg->metadata = 1;
	if (flags.metadata_uri) {
		free(cfg->metadata_uri);
		cfg->metadata_uri = flags.metadata_uri;
		flags.metadata_uri = NULL;
	}
	if (flags.advertise_count) {
		for (unsigned i = 0; i < cfg->advertise_count; i++)
			free(cfg->advertise[i]);
		memcpy(cfg->advertise, flags.advertise, sizeof(cfg->advertise));
		cfg->advertise_count = flags.advertise_count;
		flags.advertise_count = 0;
	}
	if (log_level_flag)
		cfg->log_level = flags.log_level;
	cfg->foreground = flags.foreground;

	ret = -EINVAL;
	if (!cfg->data_dir) {
		fprintf(stderr, "rdmafs-daemon: no data directory: set data_dir or --data-dir\n");
		goto err_free_cfg;
	}
	if (!cfg->listen_count) {
		fprintf(stderr, "rdmafs-daemon: nothing to listen on: set listen or --listen\n");
		goto err_free_cfg;
	}
	if (!cfg->secret_file) {
		fprintf(stderr,
			"rdmafs-daemon: no cluster secret: set secret_file or --secret-file\n");
		goto err_free_cfg;
	}
	if (!cfg->metadata && !cfg->metadata_uri) {
		fprintf(stderr, "rdmafs-daemon: without the metadata service (metadata = no) the "
				"daemon needs metadata_uri: the service to register with\n");
		goto err_free_cfg;
	}
	config_free(&flags);
	return 0;

err_free_cfg:
	config_free(cfg);
err_free_flags:
	config_free(&flags);
	return ret;
}
