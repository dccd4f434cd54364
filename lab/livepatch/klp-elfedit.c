// SPDX-License-Identifier: GPL-2.0
/*
 * klp-elfedit: the post-conversion edits of the oracle's malformed cases (case.conf post=).
 * It damages a converted livepatch module in exactly one way, so that the kernel's reaction
 * to that one defect can be observed:
 *
 *   klp-elfedit IN.ko OUT.ko rename-symbol  OLD NEW    every .symtab symbol named OLD
 *   klp-elfedit IN.ko OUT.ko rename-section OLD NEW    every section named OLD; OLD ending
 *                                                      in '*' matches by prefix, and a '*'
 *                                                      in NEW stands for the rest of the name
 *                                                      (the target section's name, which
 *                                                      differs between compilers)
 *   klp-elfedit IN.ko OUT.ko set-shndx      NAME VALUE every .symtab symbol named NAME
 *   klp-elfedit IN.ko OUT.ko replace-modinfo OLD NEW   the first OLD in .modinfo (same length)
 *   klp-elfedit IN.ko OUT.ko set-version    NAME CRC   the __versions entry of NAME
 *
 * The last two damage what the module loader checks (vermagic, symbol versions) for the
 * loader cases. New names are appended to a copy of the string table placed at the end of the file
 * (the table's sh_offset/sh_size are updated), so no other name changes, even when the
 * writer shared string tails between names. Only 64-bit little-endian ELF (x86_64). Prints
 * one line per change; exits 1 with a message when nothing matched or the input is bad.
 */
#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char *buf;
static size_t len;

static void fail(const char *msg, const char *arg)
{
	fprintf(stderr, "klp-elfedit: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
	exit(1);
}

/* A byte range of the input, checked against the file size. */
static void *at(uint64_t off, uint64_t size)
{
	if (off > len || size > len - off)
		fail("range outside the file", NULL);
	return buf + off;
}

static Elf64_Ehdr *ehdr(void)
{
	Elf64_Ehdr *e = at(0, sizeof(Elf64_Ehdr));

	if (memcmp(e->e_ident, ELFMAG, SELFMAG) || e->e_ident[EI_CLASS] != ELFCLASS64 ||
	    e->e_ident[EI_DATA] != ELFDATA2LSB)
		fail("not a 64-bit little-endian ELF file", NULL);
	if (e->e_shentsize != sizeof(Elf64_Shdr))
		fail("unexpected e_shentsize", NULL);
	return e;
}

static Elf64_Shdr *shdr(unsigned int i)
{
	Elf64_Ehdr *e = ehdr();

	if (i >= e->e_shnum)
		fail("section index out of range", NULL);
	return at(e->e_shoff + (uint64_t)i * sizeof(Elf64_Shdr), sizeof(Elf64_Shdr));
}

/* The NUL-terminated string at @off of string table @tab. */
static const char *str(const Elf64_Shdr *tab, uint32_t off)
{
	const char *s = at(tab->sh_offset, tab->sh_size);

	if (off >= tab->sh_size || !memchr(s + off, 0, tab->sh_size - off))
		fail("string offset outside its table", NULL);
	return s + off;
}

/*
 * Appends @name to a copy of string table @tab moved to the end of the file; returns the
 * offset of @name in the new table. Invalidates pointers into buf.
 */
static uint32_t append_name(unsigned int tab_index, const char *name)
{
	Elf64_Shdr *tab = shdr(tab_index);
	uint64_t old_off = tab->sh_offset, old_size = tab->sh_size, n = strlen(name) + 1;
	size_t new_len = len + old_size + n;
	unsigned char *nb;

	at(old_off, old_size);
	if (old_size + n > UINT32_MAX)
		fail("string table too large", NULL);
	nb = realloc(buf, new_len);
	if (!nb)
		fail("out of memory", NULL);
	buf = nb;
	memcpy(buf + len, buf + old_off, old_size);
	memcpy(buf + len + old_size, name, n);
	tab = shdr(tab_index);
	tab->sh_offset = len;
	tab->sh_size = old_size + n;
	len = new_len;
	return (uint32_t)old_size;
}

static unsigned int symtab_index(void)
{
	unsigned int i;

	for (i = 0; i < ehdr()->e_shnum; i++)
		if (shdr(i)->sh_type == SHT_SYMTAB)
			return i;
	fail("no .symtab", NULL);
	return 0;
}

/* Calls @edit for every .symtab entry named @name; returns how many matched. */
static int for_each_symbol(const char *name, void (*edit)(Elf64_Sym *, unsigned int, const char *),
			   const char *arg)
{
	unsigned int si = symtab_index(), i, count;
	int hits = 0;

	count = shdr(si)->sh_size / sizeof(Elf64_Sym);
	for (i = 0; i < count; i++) {
		Elf64_Shdr *st = shdr(si);
		Elf64_Sym *sym = at(st->sh_offset + (uint64_t)i * sizeof(Elf64_Sym), sizeof(Elf64_Sym));

		if (strcmp(str(shdr(st->sh_link), sym->st_name), name))
			continue;
		edit(sym, i, arg);
		hits++;
	}
	return hits;
}

static void rename_symbol(Elf64_Sym *sym, unsigned int index, const char *new_name)
{
	unsigned int si = symtab_index();
	uint64_t sym_off = (uint8_t *)sym - buf;
	uint32_t off = append_name(shdr(si)->sh_link, new_name);

	((Elf64_Sym *)(buf + sym_off))->st_name = off;
	printf("symbol %u renamed to %s\n", index, new_name);
}

static void set_shndx(Elf64_Sym *sym, unsigned int index, const char *value)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(value, &end, 0);
	if (errno || *end || v > 0xffff)
		fail("st_shndx must be a number up to 0xffff", value);
	printf("symbol %u st_shndx 0x%x -> 0x%lx\n", index, sym->st_shndx, v);
	sym->st_shndx = (uint16_t)v;
}

static int rename_section(const char *old_name, const char *new_name)
{
	unsigned int i, shstrndx = ehdr()->e_shstrndx;
	size_t old_len = strlen(old_name), prefix = old_len;
	int hits = 0;

	if (old_len && old_name[old_len - 1] == '*')
		prefix = old_len - 1;
	for (i = 0; i < ehdr()->e_shnum; i++) {
		const char *name = str(shdr(shstrndx), shdr(i)->sh_name);
		char full[512];
		const char *star = strchr(new_name, '*');

		if (prefix == old_len ? strcmp(name, old_name) : strncmp(name, old_name, prefix))
			continue;
		if (prefix < old_len && star) {
			/* NEW with its '*' replaced by what followed the prefix. */
			if ((size_t)snprintf(full, sizeof(full), "%.*s%s%s", (int)(star - new_name),
					     new_name, name + prefix, star + 1) >= sizeof(full))
				fail("new name too long", new_name);
		} else {
			if (strlen(new_name) >= sizeof(full))
				fail("new name too long", new_name);
			strcpy(full, new_name);
		}
		uint32_t off = append_name(shstrndx, full); /* moves buf: no pointer kept */

		shdr(i)->sh_name = off;
		printf("section %u renamed to %s\n", i, full);
		hits++;
	}
	return hits;
}

/* The section named @name, or fail. */
static Elf64_Shdr *section_named(const char *name)
{
	Elf64_Ehdr *e = ehdr();
	unsigned int i;

	for (i = 1; i < e->e_shnum; i++)
		if (!strcmp(str(shdr(e->e_shstrndx), shdr(i)->sh_name), name))
			return shdr(i);
	fail("no section", name);
	return NULL;
}

/* Replaces the first @old in .modinfo by @new, which must be as long. */
static int replace_modinfo(const char *old, const char *new)
{
	Elf64_Shdr *s = section_named(".modinfo");
	unsigned char *d = at(s->sh_offset, s->sh_size);
	size_t n = strlen(old), i;

	if (strlen(new) != n || !n)
		fail("replace-modinfo: OLD and NEW must have the same, non-zero length", NULL);
	for (i = 0; i + n <= s->sh_size; i++) {
		if (!memcmp(d + i, old, n)) {
			memcpy(d + i, new, n);
			printf("replaced '%s' by '%s' at .modinfo+%#zx\n", old, new, i);
			return 1;
		}
	}
	return 0;
}

/* struct modversion_info on 64-bit: unsigned long crc; char name[56]. */
static int set_version(const char *name, const char *crc)
{
	Elf64_Shdr *s = section_named("__versions");
	unsigned char *d = at(s->sh_offset, s->sh_size);
	uint64_t v = strtoull(crc, NULL, 0);
	size_t i;
	int hits = 0;

	for (i = 0; i + 64 <= s->sh_size; i += 64) {
		if (!strncmp((const char *)d + i + 8, name, 56)) {
			memcpy(d + i, &v, 8);
			printf("__versions: %s crc set to %#llx\n", name, (unsigned long long)v);
			hits++;
		}
	}
	return hits;
}

int main(int argc, char **argv)
{
	FILE *f;
	long size;
	int hits;

	if (argc != 6)
		fail("usage: klp-elfedit IN OUT rename-symbol|rename-section|set-shndx|replace-modinfo|set-version A B", NULL);
	f = fopen(argv[1], "rb");
	if (!f || fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
		fail("cannot read", argv[1]);
	len = (size_t)size;
	buf = malloc(len ? len : 1);
	if (!buf || fread(buf, 1, len, f) != len)
		fail("cannot read", argv[1]);
	fclose(f);
	ehdr();

	if (!strcmp(argv[3], "rename-symbol"))
		hits = for_each_symbol(argv[4], rename_symbol, argv[5]);
	else if (!strcmp(argv[3], "set-shndx"))
		hits = for_each_symbol(argv[4], set_shndx, argv[5]);
	else if (!strcmp(argv[3], "rename-section"))
		hits = rename_section(argv[4], argv[5]);
	else if (!strcmp(argv[3], "replace-modinfo"))
		hits = replace_modinfo(argv[4], argv[5]);
	else if (!strcmp(argv[3], "set-version"))
		hits = set_version(argv[4], argv[5]);
	else
		fail("unknown operation", argv[3]);
	if (!hits)
		fail("nothing is named", argv[4]);

	f = fopen(argv[2], "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f))
		fail("cannot write", argv[2]);
	return 0;
}
