#!/bin/sh
# Installs gantry and the guest assets it boots where the installed binary
# finds them (src/common/assets.h): PREFIX/bin/gantry (and gantry-oci, a
# link to it) and
# PREFIX/lib/gantry/assets/; and its man page and bash and zsh completions,
# made from its help texts (scripts/cli-doc), under PREFIX/share. Used by `make install` and `make deb`, and by
# `meson install` (--assets-only: meson installs the binary itself, and
# names the destination in MESON_INSTALL_DESTDIR_PREFIX).
#
#   scripts/install.sh BUILD DEST          binary and assets into DEST
#   scripts/install.sh BUILD --assets-only the assets, for meson install
#   scripts/install.sh --uninstall DEST    remove what an install put there
set -eu

if [ "${1:-}" = --uninstall ]; then
	dest=${2:?usage: install.sh --uninstall DEST}
	rm -f "$dest/bin/gantry" "$dest/bin/gantry-oci" "$dest/share/man/man1/gantry.1" \
		"$dest/share/bash-completion/completions/gantry" \
		"$dest/share/zsh/vendor-completions/_gantry"
	rm -rf "$dest/lib/gantry"
	# The directories an install made, where nothing else is left in them
	# (rmdir takes only empty ones; /usr/bin and the like stay).
	for d in bin lib share/man/man1 share/man share/bash-completion/completions \
		share/bash-completion share/zsh/vendor-completions share/zsh share; do
		rmdir "$dest/$d" 2>/dev/null || true
	done
	echo "removed gantry from $dest"
	exit 0
fi

build=${1:?usage: install.sh BUILD DEST | BUILD --assets-only}
binary=true
if [ "${2:-}" = --assets-only ]; then
	binary=false
	dest=${MESON_INSTALL_DESTDIR_PREFIX:?--assets-only is for meson install}
else
	dest=${2:?usage: install.sh BUILD DEST}
fi

assets=$build/assets
for a in vmlinux sysroot.erofs default-image/index.json; do
	if [ ! -e "$assets/$a" ]; then
		echo "install: $assets/$a missing: run \`make assets\` first" >&2
		exit 1
	fi
done
if $binary && [ ! -x "$build/gantry" ]; then
	echo "install: $build/gantry missing: run \`make build\` first" >&2
	exit 1
fi

if $binary; then
	install -D -m 0755 "$build/gantry" "$dest/bin/gantry"
	# The OCI runtime is the same binary by another name (docs/oci.md).
	ln -sf gantry "$dest/bin/gantry-oci"
fi
lib=$dest/lib/gantry/assets
# A previous install's image goes whole: its blobs are named by digest.
rm -rf "$lib.new"
install -d -m 0755 "$lib.new"
install -m 0644 "$assets/vmlinux" "$assets/sysroot.erofs" "$lib.new/"
cp -R "$assets/default-image" "$lib.new/default-image"
chmod -R u=rwX,go=rX "$lib.new/default-image"
rm -rf "$lib"
mv "$lib.new" "$lib"

top=$(cd "$(dirname "$0")/.." && pwd)
share=$dest/share
install -d -m 0755 "$share/man/man1" "$share/bash-completion/completions" \
	"$share/zsh/vendor-completions"
python3 "$top/scripts/cli-doc" --binary "$build/gantry" --man "$share/man/man1/gantry.1" \
	--bash "$share/bash-completion/completions/gantry" --zsh "$share/zsh/vendor-completions/_gantry"
chmod 0644 "$share/man/man1/gantry.1" "$share/bash-completion/completions/gantry" \
	"$share/zsh/vendor-completions/_gantry"
echo "installed gantry in $dest (assets in $lib)"
