# The product: `make [flavor=e2b-rt|e2b-base|e2b-ci] [release=trixie|bookworm] ...`
# -> out/<flavor>/{oci/,rootfs.ext4,manifest.json}. See os-image/README.md.
# Every knob reaches os-image/build.sh the same way: its default here (flavor,
# out and python in the top Makefile), then IMAGE_ENV, as an upper-case
# environment variable.

release         ?= trixie
distro          ?= debian
mirror          ?=
security_mirror ?=
snapshot        ?=
snapshot_base   ?=
recipes         ?= recipes
# envd: source (built from recipes/envd.lock's [envd-source] with one pinned
# Go toolchain, cached by the pin) or release (the pinned release binary).
envd            ?= source
go_toolchain    ?= go1.26.8
pin_mirror      ?=
offline         ?= 0
cache           ?= $(out)/cache
# 1: reuse mkosi's cached package installation (warm rebuilds); 0: fresh.
incremental ?= 1
# Free space left in rootfs.ext4 beyond the files (MiB); pools usually grow it.
rootfs_headroom_mb ?= 256
# e2b-ci's Python stack: pip (a venv from constraints/, wheels from pip_index,
# else $PIP_INDEX_URL, else the host's pip configuration) or debian (packages).
pydeps          ?= pip
pip_index       ?= $(PIP_INDEX_URL)
# e2b-ci's Jupyter kernels, as upstream's make_template(kernels=...): a comma
# list of python, javascript, r, bash, java; python and javascript are always
# in (os-image/e2b-ci/README.md, "Kernels"). Other flavors check the names only.
kernels         ?= python,javascript,r,bash,java
# 0: stop after mkosi, without pack.py (bench/image.sh's peer run).
pack            ?= $(or $(PACK),1)
mkosi_args      ?= $(MKOSI_ARGS)
# The repository's URL, for the org.opencontainers.image.source label (none by default).
source_url      ?=
# Builder mode: an image of one's own to install the flavor's runtime onto,
# oci:PATH[:REF] or docker-archive:FILE (PATH relative to this directory);
# its os-release sets distro and release (template/README.md, "Builder mode").
base            ?=
# Confined builds (builder mode, templates): IPv4 networks their steps may not
# reach, beyond the host's loopback and own addresses and 169.254.0.0/16
# (sandbox/README.md), e.g. the build network's private range.
sandbox_deny    ?=
# The shared cache (regcache/README.md): E2B template step layers, pinned
# artifacts and envd's source build, through REGISTRY/REPO; off when empty.
# cache_registry_push=0: only read it (a runner of untrusted branches).
cache_registry  ?=
cache_registry_push ?= 1

IMAGE_ENV = FLAVOR='$(flavor)' RELEASE='$(release)' DISTRO='$(distro)' \
        MIRROR='$(mirror)' SECURITY_MIRROR='$(security_mirror)' \
        SNAPSHOT='$(snapshot)' SNAPSHOT_BASE='$(snapshot_base)' \
        RECIPES='$(abspath $(recipes))' ENVD='$(envd)' GO_TOOLCHAIN='$(go_toolchain)' PIN_MIRROR='$(pin_mirror)' OFFLINE='$(offline)' \
        CACHE='$(abspath $(cache))' TOOLS='$(abspath $(build))' \
        ROOTFS_HEADROOM_MB='$(rootfs_headroom_mb)' INCREMENTAL='$(incremental)' \
        PYDEPS='$(pydeps)' PIP_INDEX='$(pip_index)' KERNELS='$(kernels)' \
        PACK='$(pack)' MKOSI_ARGS='$(mkosi_args)' PYTHON='$(python)' SOURCE_URL='$(source_url)' \
        BASE='$(base)' CERT_DIR='$(cert_dir)' SANDBOX_DENY='$(sandbox_deny)' \
        CACHE_REGISTRY='$(cache_registry)' CACHE_REGISTRY_PUSH='$(cache_registry_push)'

# A template directory (template/README.md): `make template=DIR` builds it on
# its base flavor into out/<name>/ (template/template.sh).
template        ?=
# E2B templates: reuse the layers of unchanged steps (template/README.md,
# "The step cache"), in cache/e2b-steps, at most step_cache_max_mb; tenant
# scopes them (with the template's folder).
step_cache      ?= 1
step_cache_max_mb ?= 4096
tenant          ?=
# E2B templates: the folders (colon-separated) where fromTemplate finds a
# local template by name; none by default (template/README.md).
template_path   ?=
# 1: a fromImage copy in the cache is used without the registry confirming
# the credentials can read it (also with offline=1; template/README.md).
trust_image_cache ?= 0
FLAVORS         := $(notdir $(wildcard os-image/mkosi.profiles/*))
TEMPLATE_ENV = TEMPLATE='$(abspath $(template))' OUTROOT='$(abspath $(out))' FLAVORS='$(FLAVORS)' \
        E2B_SDK='$(abspath $(E2B_SDK))' E2B_SDK_REQUIREMENTS='$(abspath $(E2B_SDK_REQUIREMENTS))' \
        STEP_CACHE_ON='$(step_cache)' STEP_CACHE_MAX_MB='$(step_cache_max_mb)' TENANT='$(tenant)' \
        TEMPLATE_PATH='$(template_path)' TRUST_IMAGE_CACHE='$(trust_image_cache)'

.PHONY: image image-preflight repro guest-tools cache-prune
image: tools
	$(if $(template),$(IMAGE_ENV) $(TEMPLATE_ENV) bash template/template.sh,$(IMAGE_ENV) OUT='$(abspath $(out))/$(flavor)' bash os-image/build.sh)

# Only the quick steps (apt sources, pinned artifacts, envd version, units):
# what fails early in `make image`, without mkosi.
image-preflight: tools
	$(IMAGE_ENV) OUT='$(abspath $(out))/$(flavor)' PREFLIGHT_ONLY=1 bash os-image/build.sh

# Two builds of the same commit in separate directories (shared package
# cache), compared byte for byte.
repro: tools
	$(if $(template),$(IMAGE_ENV) $(TEMPLATE_ENV) REPRO=1 bash template/template.sh,$(IMAGE_ENV) OUT='$(abspath $(out))/repro/$(flavor)' bash os-image/repro.sh)

# Runs inside the mkosi build (os-image/mkosi.build, via mkosi-chroot): the
# tools the guest runs, compiled against the image's own libraries with
# mk/c.mk's flags, stripped, installed into DESTDIR.
GUEST_TOOLS ?= envd-guard mmds-serve vsock-relay e2b-clone
guest-tools: $(addprefix $(build)/,$(GUEST_TOOLS))
	install -d -m 0755 $(DESTDIR)/usr/bin
	$(if $^,install -m 0755 -s $^ $(DESTDIR)/usr/bin/)

# The shared cache's eviction (regcache/README.md, "Eviction"): the entries
# pushed more than older_than_days ago leave cache_registry; the registry's
# garbage collection then frees their blobs. prune_args: --kind K --tenant T --dry-run.
older_than_days ?= 30
cache-prune:
	CACHE_REGISTRY='$(cache_registry)' CERT_DIR='$(cert_dir)' PYTHONPATH='$(CURDIR)' \
		$(python) -m regcache prune --older-than-days '$(older_than_days)' $(prune_args)

# Flavor-specific helper targets (e.g. os-image/e2b-ci/e2b-ci.mk: ci-patch-check).
include os-image/e2b-ci/e2b-ci.mk
