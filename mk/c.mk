# C build rules shared by every tool.
#
# A tool folder's fragment (pin/pin.mk, ...) declares programs:
#   TOOLS   += name     shipped tools:      build/name      and build/san/name
#   UNITS   += name     C unit tests (TAP): build/unit/name and build/san/unit/name
#   FUZZERS += name     libFuzzer targets:  build/fuzz/name
#   name_SRCS := ...    sources, common/ helpers named explicitly
#   name_PKGS := ...    pkg-config packages
#   name_LDLIBS := ...  anything else to link

CC         ?= cc
CLANG      ?= clang
PKG_CONFIG ?= pkg-config

WARN      := -Wall -Wextra -Werror -Wformat=2 -Wshadow -Wstrict-prototypes \
             -Wmissing-prototypes -Wvla -Wno-unused-parameter
BASE      := -std=c11 -D_GNU_SOURCE -Icommon -MMD -MP $(WARN)
CFLAGS    ?= -O2 -g
HARDEN    := -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fstack-clash-protection \
             -fcf-protection -fPIE
LDHARDEN  := -pie -Wl,-z,relro,-z,now -Wl,-z,noexecstack -Wl,--as-needed
SANFLAGS  := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
             -fno-omit-frame-pointer
FUZZFLAGS := -O1 -g -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer

# pkg-config runs only when a recipe needs its answer (so parsing the
# Makefile, e.g. for `make deps` on a bare machine, never runs it), and
# PKG_CFLAGS only once: its first use replaces it with its value.
pkg_libs  = $(if $(strip $(1)),$(shell $(PKG_CONFIG) --libs $(1)))
ALL_PKGS  = $(sort $(foreach p,$(TOOLS) $(UNITS) $(FUZZERS),$($(p)_PKGS)))
PKG_CFLAGS = $(eval PKG_CFLAGS := $$(if $$(strip $$(ALL_PKGS)),$$(shell $$(PKG_CONFIG) --cflags $$(ALL_PKGS))))$(PKG_CFLAGS)

objs = $(patsubst %.c,$(2)/%.o,$($(1)_SRCS))

# One object tree per variant.
$(build)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) $(HARDEN) $(PKG_CFLAGS) -c -o $@ $<
$(build)/san/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(SANFLAGS) $(PKG_CFLAGS) -c -o $@ $<
$(build)/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CLANG) $(BASE) $(FUZZFLAGS) $(PKG_CFLAGS) -c -o $@ $<

# $(call link_rules,NAME,OUTDIR,OBJDIR,LINKER,LDFLAGS)
define link_rule
$(2)/$(1): $(call objs,$(1),$(3))
	@mkdir -p $$(dir $$@)
	$(4) $(5) -o $$@ $$^ $$(call pkg_libs,$$($(1)_PKGS)) $$($(1)_LDLIBS)
-include $(patsubst %.o,%.d,$(call objs,$(1),$(3)))
endef

# Second expansion: the fragments that fill TOOLS etc. are read after this file.
.SECONDEXPANSION:
tools:     $$(addprefix $$(build)/,$$(TOOLS))
san-tools: $$(addprefix $$(build)/san/,$$(TOOLS))
units:     $$(addprefix $$(build)/unit/,$$(UNITS)) $$(addprefix $$(build)/san/unit/,$$(UNITS))
fuzzers:   $$(addprefix $$(build)/fuzz/,$$(FUZZERS))
