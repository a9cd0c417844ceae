/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdmafs-copy at a terminal: its width, text wrapped to it, and a shell
 * command printed so that it survives the wrapping.
 *
 * Lines stay shorter than the terminal by one column: a character in the
 * last column leaves many terminals waiting to wrap, and the next \r or
 * newline then behaves differently from one terminal to the next.
 */
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "copy_i.h"

/* A terminal that reports no size (a serial line, some emulators) is taken as this wide. */
#define DEFAULT_COLUMNS 80

unsigned cp_term_width(int fd)
{
	struct winsize ws;

	if (!isatty(fd))
		return 0;
	if (ioctl(fd, TIOCGWINSZ, &ws) || ws.ws_col == 0)
		return DEFAULT_COLUMNS;
	return ws.ws_col;
}

void cp_term_wrap(FILE *out, unsigned width, const char *text)
{
	const size_t indent = 2;
	size_t max, col = 0;
	const char *p = text;
	bool space = false; /* a space goes before the next word on this line */

	if (!width) {
		fprintf(out, "%s\n", text);
		return;
	}
	/* room for the indent and one character at least, however narrow */
	max = width > indent + 2 ? width - 1 : indent + 1;
	while (*p) {
		size_t word = strcspn(p, " \n");

		if (*p == '\n' || *p == ' ') {
			if (*p == '\n') {
				fputc('\n', out);
				col = 0;
			}
			space = *p == ' ' && col > 0;
			p++;
			continue;
		}
		if (col > 0 && col + space + word > max) {
			fprintf(out, "\n%*s", (int)indent, "");
			col = indent;
		} else if (space) {
			fputc(' ', out);
			col++;
		}
		space = false;
		/* a word longer than a line is cut */
		while (word) {
			size_t n = max - col < word ? max - col : word;

			fwrite(p, 1, n, out);
			p += n;
			word -= n;
			col += n;
			if (word) {
				fprintf(out, "\n%*s", (int)indent, "");
				col = indent;
			}
		}
	}
	fputc('\n', out);
}

/* Characters the shell takes literally outside quotes. */
static bool shell_plain(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       strchr("_@%+=:,./-", c);
}

/* The length of @len bytes of @s once quoted (quote() writes them). */
static size_t quoted_len(const char *s, size_t len)
{
	size_t n = 0;
	bool plain = len > 0;

	for (size_t i = 0; i < len; i++) {
		plain &= shell_plain(s[i]);
		n += s[i] == '\'' ? 4 : 1; /* ' becomes '\'' */
	}
	return plain ? len : n + 2;
}

static void quote(FILE *out, const char *s, size_t len)
{
	if (quoted_len(s, len) == len) {
		fwrite(s, 1, len, out);
		return;
	}
	fputc('\'', out);
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '\'')
			fputs("'\\''", out);
		else
			fputc(s[i], out);
	}
	fputc('\'', out);
}

void cp_term_command(FILE *out, unsigned width, char *const *words, size_t count)
{
	/* a line holds the text, then " \" (or "\" inside a cut word) */
	const size_t indent = 2, next_indent = 4;
	size_t max = width > next_indent + 8 ? width - 1 : next_indent + 7, col;

	fprintf(out, "%*s", (int)indent, "");
	col = indent;
	for (size_t i = 0; i < count; i++) {
		const char *w = words[i];
		size_t len = strlen(w), q = quoted_len(w, len);

		if (!width) {
			if (i)
				fputc(' ', out);
			quote(out, w, len);
			continue;
		}
		if (i && col + 1 + q + 2 <= max) {
			fputc(' ', out);
			quote(out, w, len);
			col += 1 + q;
			continue;
		}
		if (i) {
			fprintf(out, " \\\n%*s", (int)next_indent, "");
			col = next_indent;
		}
		if (col + q + 2 <= max) {
			quote(out, w, len);
			col += q;
			continue;
		}
		/*
		 * Too long for any line: cut it into pieces, each quoted on its own
		 * and joined by backslash-newline, which the shell removes, so the
		 * pieces make one word again.
		 */
		while (len) {
			size_t n = 1;

			while (n < len && col + quoted_len(w, n + 1) + 1 <= max)
				n++;
			quote(out, w, n);
			col += quoted_len(w, n);
			w += n;
			len -= n;
			if (len) {
				fputs("\\\n", out);
				col = 0;
			}
		}
	}
	fputc('\n', out);
}
