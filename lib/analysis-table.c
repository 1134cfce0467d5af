/* Tables of the analysis: cells as text, printed as TEXT, JSON or CSV. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis-int.h"
#include "trace.h"
#include "util.h"

/* Allocation failures in table building abort the program: tables are
 * small and a partial table would be silently wrong. */
static void *
tab_xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (p == NULL) {
		fputs("analysis: out of memory\n", stderr);
		abort();
	}
	return p;
}

static char *
tab_xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;

	return memcpy(tab_xrealloc(NULL, n), s, n);
}

/* A copy of s[0..n) and a NUL in t's arena (lib/trace.c's). */
static char *
tab_arena_dup(struct table *t, const char *s, size_t n)
{
	char *d = trace_arena_dup(&t->arena, s, n);

	if (d == NULL) {
		fputs("analysis: out of memory\n", stderr);
		abort();
	}
	return d;
}

struct table *
table_new(const char *name, const char *title, size_t ncols,
    const char *const *cols)
{
	struct table *t = tab_xrealloc(NULL, sizeof(*t));

	memset(t, 0, sizeof(*t));
	t->name = tab_xstrdup(name);
	t->title = tab_xstrdup(title);
	t->ncols = ncols;
	t->cols = tab_xrealloc(NULL, ncols * sizeof(char *));
	for (size_t i = 0; i < ncols; i++)
		t->cols[i] = tab_xstrdup(cols[i]);
	t->cur = ncols;
	return t;
}

void
table_free(struct table *t)
{
	if (t == NULL)
		return;
	trace_arena_free(t->arena);
	for (size_t i = 0; i < t->ncols; i++)
		free(t->cols[i]);
	free(t->cells);
	free(t->numeric);
	free(t->cols);
	free(t->name);
	free(t->title);
	free(t);
}

static void
tab_grow(struct table *t, size_t cap)
{
	t->cap = cap;
	t->cells = tab_xrealloc(t->cells, cap * t->ncols * sizeof(*t->cells));
	t->numeric = tab_xrealloc(t->numeric, cap * t->ncols);
}

void
table_reserve(struct table *t, size_t n)
{
	if (t->cap - t->nrows < n)
		tab_grow(t, t->nrows + n);
}

/* Starts a row; missing cells of the previous row stay empty. */
void
table_row(struct table *t)
{
	while (t->nrows > 0 && t->cur < t->ncols)
		table_str(t, "");
	if (t->nrows == t->cap)
		tab_grow(t, t->cap ? t->cap * 2 : 16);
	t->nrows++;
	t->cur = 0;
}

/*
 * What a cell holds (struct table's numeric[]): text, a number already
 * written (both .s), or a number kept as given (.i, .u, .d) until
 * table_cell writes it (a double with TAB_F + prec digits, prec 0 to
 * TAB_F_MAX).
 */
enum {
	TAB_TEXT = 0,
	TAB_NUM = 1,
	TAB_I64 = 2,
	TAB_U64 = 3,
	TAB_F = 4,
	TAB_F_MAX = 100,
};

/* The next cell of the row: s[0..n). */
static void
tab_put(struct table *t, const char *s, size_t n, int numeric)
{
	size_t i;

	if (t->nrows == 0 || t->cur >= t->ncols)
		return;
	i = (t->nrows - 1) * t->ncols + t->cur++;
	t->cells[i].s = tab_arena_dup(t, s, n);
	t->numeric[i] = (unsigned char)numeric;
}

/* The next cell of the row: v, written out when first read. */
static void
tab_put_val(struct table *t, union tab_val v, int kind)
{
	size_t i;

	if (t->nrows == 0 || t->cur >= t->ncols)
		return;
	i = (t->nrows - 1) * t->ncols + t->cur++;
	t->cells[i] = v;
	t->numeric[i] = (unsigned char)kind;
}

void
table_str(struct table *t, const char *s)
{
	if (s == NULL)
		s = "";
	tab_put(t, s, strlen(s), 0);
}

/*
 * printf's "%.*f" without printf for the common cells (a report builds
 * hundreds of thousands; printf's exact conversion was a sixth of a
 * report's time).  Exact: the scaled value is off the exact one by under
 * 1e-7 below 1e9, so away from a rounding tie it rounds to the integer
 * printf's exact expansion rounds to.  Returns the length written, 0
 * when it cannot say.
 */
static int
tab_fixed(char *buf, double v, int prec)
{
	static const double p10[] = { 1, 10, 100, 1e3, 1e4, 1e5, 1e6 };
	char dig[24], *e;
	double r, f;
	uint32_t q;
	int n, o = 0;

	if (prec < 0 || prec > 6)
		return 0;
	r = fabs(v) * p10[prec];
	if (!(r < 1e9))
		return 0;
	/* Below 1e9, the integer part fits 32 bits (and truncates as
	 * floor); a step's row is ten of these, so the digits come two at
	 * a time (util_u64_dec), with the leading zeros "%.*f" gives. */
	q = (uint32_t)r;
	f = r - (double)q;
	if (fabs(f - 0.5) < 1e-6)
		return 0;
	q += f > 0.5;
	memset(dig, '0', 8);
	e = util_u64_dec(dig + 8, q);
	n = (int)(e - (dig + 8));
	if (n <= prec)
		n = prec + 1;
	e -= n;
	if (signbit(v))
		buf[o++] = '-';
	memcpy(buf + o, e, (size_t)(n - prec));
	o += n - prec;
	if (prec > 0) {
		buf[o++] = '.';
		memcpy(buf + o, e + n - prec, (size_t)prec);
		o += prec;
	}
	buf[o] = '\0';
	return o;
}

/* Writes v with prec digits as printf's "%.*f" does into buf (64). */
static int
tab_num_text(char *buf, double v, int prec)
{
	int n;

	if ((n = tab_fixed(buf, v, prec)) == 0) {
		/* Cut as the copy of buf was (a huge value). */
		n = snprintf(buf, 64, "%.*f", prec, v);
		if (n < 0)
			n = 0;
		else if (n >= 64)
			n = 63;
	}
	return n;
}

void
table_num(struct table *t, double v, int prec)
{
	char buf[64];

	if (!isfinite(v))
		v = 0;
	if (prec >= 0 && prec <= TAB_F_MAX)
		tab_put_val(t, (union tab_val){ .d = v }, TAB_F + prec);
	else
		tab_put(t, buf, (size_t)tab_num_text(buf, v, prec), 1);
}

void
table_u64(struct table *t, uint64_t v)
{
	tab_put_val(t, (union tab_val){ .u = v }, TAB_U64);
}

void
table_i64(struct table *t, int64_t v)
{
	tab_put_val(t, (union tab_val){ .i = v }, TAB_I64);
}

const char *table_name(const struct table *t) { return t->name; }
const char *table_title(const struct table *t) { return t->title; }
size_t table_ncols(const struct table *t) { return t->ncols; }
size_t table_nrows(const struct table *t) { return t->nrows; }

const char *
table_col(const struct table *t, size_t col)
{
	return col < t->ncols ? t->cols[col] : "";
}

const char *
table_cell(const struct table *t, size_t row, size_t col, bool *numeric)
{
	size_t i = row * t->ncols + col;

	if (numeric != NULL)
		*numeric = false;
	if (row >= t->nrows || col >= t->ncols ||
	    (row == t->nrows - 1 && col >= t->cur))
		return "";
	if (numeric != NULL)
		*numeric = t->numeric[i] != TAB_TEXT;
	if (t->numeric[i] >= TAB_I64) {
		/* A number kept as given: written once, into the arena (the
		 * table's text is a cache; the table is read by one thread
		 * at a time). */
		struct table *w = (struct table *)(uintptr_t)t;
		char buf[64], *o = buf;
		const union tab_val *v = &t->cells[i];

		switch (t->numeric[i]) {
		case TAB_I64:
			if (v->i < 0)
				*o++ = '-';
			o = util_u64_dec(o, v->i < 0 ? -(uint64_t)v->i :
			    (uint64_t)v->i);
			break;
		case TAB_U64:
			o = util_u64_dec(o, v->u);
			break;
		default:
			o += tab_num_text(buf, v->d, t->numeric[i] - TAB_F);
			break;
		}
		w->cells[i].s = tab_arena_dup(w, buf, (size_t)(o - buf));
		w->numeric[i] = TAB_NUM;
	}
	return t->cells[i].s;
}

void
table_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

void
table_csv_str(FILE *f, const char *s, const char *special)
{
	if (strpbrk(s, special) == NULL) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

#define TAB_CSV_SPECIAL	",\"\n\r"

int
table_print(const struct table *t, enum table_format fmt, FILE *f)
{
	size_t *w, r, c;
	bool num;

	switch (fmt) {
	case TABLE_JSON:
		fputc('[', f);
		for (r = 0; r < t->nrows; r++) {
			fputs(r ? ",\n {" : "{", f);
			for (c = 0; c < t->ncols; c++) {
				const char *v = table_cell(t, r, c, &num);

				if (c)
					fputc(',', f);
				table_json_str(f, t->cols[c]);
				fputc(':', f);
				if (num)
					fputs(v, f);
				else
					table_json_str(f, v);
			}
			fputc('}', f);
		}
		fputs("]", f);
		break;
	case TABLE_CSV:
		for (c = 0; c < t->ncols; c++) {
			if (c)
				fputc(',', f);
			table_csv_str(f, t->cols[c], TAB_CSV_SPECIAL);
		}
		fputc('\n', f);
		for (r = 0; r < t->nrows; r++) {
			for (c = 0; c < t->ncols; c++) {
				if (c)
					fputc(',', f);
				table_csv_str(f, table_cell(t, r, c, NULL),
				    TAB_CSV_SPECIAL);
			}
			fputc('\n', f);
		}
		break;
	default:
		w = tab_xrealloc(NULL, t->ncols * sizeof(size_t));
		for (c = 0; c < t->ncols; c++) {
			w[c] = strlen(t->cols[c]);
			for (r = 0; r < t->nrows; r++) {
				size_t l = strlen(table_cell(t, r, c, NULL));

				if (l > w[c])
					w[c] = l;
			}
			if (w[c] > 60)
				w[c] = 60;
		}
		fprintf(f, "== %s\n", t->title);
		for (c = 0; c < t->ncols; c++)
			fprintf(f, "%s%-*s", c ? "  " : "", (int)w[c], t->cols[c]);
		fputc('\n', f);
		for (r = 0; r < t->nrows; r++) {
			for (c = 0; c < t->ncols; c++) {
				const char *v = table_cell(t, r, c, &num);

				fprintf(f, num ? "%s%*s" : "%s%-*s", c ? "  " : "",
				    (int)w[c], v);
			}
			fputc('\n', f);
		}
		if (t->nrows == 0)
			fputs("(none)\n", f);
		free(w);
		break;
	}
	return ferror(f) ? -EIO : 0;
}
