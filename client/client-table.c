/*
 * The CLI's text tables: cells are collected first, so every column is
 * as wide as its widest cell (a 40-character job id moves the columns
 * after it, it does not push one row out of line).  The last column is
 * not padded.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

struct client_table {
	size_t	  ncols;
	size_t	  ncells;
	char	**cells;	/* row-major, the header first */
	size_t	 *width;
};

/* A table with the ncols names in header as its first row; NULL when out
 * of memory.  client_table_free frees it. */
struct client_table *
client_table_new(size_t ncols, const char *const *header)
{
	struct client_table *t = calloc(1, sizeof(*t));

	if (t == NULL || (t->width = calloc(ncols, sizeof(*t->width))) ==
	    NULL) {
		free(t);
		return NULL;
	}
	t->ncols = ncols;
	for (size_t i = 0; i < ncols; i++)
		client_table_cell(t, "%s", header[i]);
	return t;
}

void
client_table_free(struct client_table *t)
{
	if (t == NULL)
		return;
	for (size_t i = 0; i < t->ncells; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t->width);
	free(t);
}

/* Appends the next cell, row by row.  Out of memory, the cell is "?":
 * the table keeps its shape. */
void
client_table_cell(struct client_table *t, const char *fmt, ...)
{
	char **nv, *s = NULL;
	va_list ap;
	size_t len;

	if (t == NULL)
		return;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	if ((nv = realloc(t->cells, (t->ncells + 1) * sizeof(*nv))) == NULL) {
		free(s);
		return;
	}
	t->cells = nv;
	nv[t->ncells] = s;
	len = s != NULL ? strlen(s) : 1;
	if (len > t->width[t->ncells % t->ncols])
		t->width[t->ncells % t->ncols] = len;
	t->ncells++;
}

/* Rows, the header included, filled so far. */
size_t
client_table_rows(const struct client_table *t)
{
	return t != NULL ? t->ncells / t->ncols : 0;
}

/* Prints row (0: the header), two spaces between columns. */
void
client_table_print_row(const struct client_table *t, size_t row, FILE *f)
{
	for (size_t c = 0; t != NULL && c < t->ncols; c++) {
		size_t i = row * t->ncols + c;
		const char *s = i < t->ncells && t->cells[i] != NULL ?
		    t->cells[i] : "?";

		if (c + 1 == t->ncols)
			fputs(s, f);
		else
			fprintf(f, "%-*s  ", (int)t->width[c], s);
	}
	fputc('\n', f);
}

/* Prints the whole table. */
void
client_table_print(const struct client_table *t, FILE *f)
{
	for (size_t r = 0; r < client_table_rows(t); r++)
		client_table_print_row(t, r, f);
}
