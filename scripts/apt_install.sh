# Sourced by the install_*.sh scripts: `apt_install PACKAGE...` installs Debian packages from the
# distribution's apt sources, as root (CI runs them so); otherwise it says how and exits 1.
apt_install() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "error: installing $* needs root (apt-get); run: sudo $0" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "$@"
}
