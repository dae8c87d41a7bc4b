"""Stand-in for the get-pip.py that ansible-test downloads from a host CI cannot reach.

``--install-cache`` copies this file to where ansible-test looks for its cached bootstrap script.
Run by ansible-test as that script, it bootstraps pip with ensurepip, then installs the pip version
ansible-test asked for from the package index that pip is configured for.
"""
import os
import subprocess
import sys

ANSIBLE_TEST_PIP_VERSIONS = ("24.2",)
GET_PIP_ONLY_OPTIONS = ("--no-setuptools", "--no-wheel")


def install_cache():
    cache_dir = os.path.expanduser("~/.ansible/test/cache")
    os.makedirs(cache_dir, exist_ok=True)
    with open(__file__, "rb") as source:
        body = source.read()
    for version in ANSIBLE_TEST_PIP_VERSIONS:
        path = os.path.join(cache_dir, "get_pip_%s.py" % version.replace(".", "_"))
        with open(path, "wb") as target:
            target.write(body)


def bootstrap(pip_arguments):
    # ensurepip sets PIP_CONFIG_FILE=/dev/null in its own environment; keeping it in a child process leaves
    # ours intact, so the pip below still reads /etc/pip.conf (index, certificates).
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"],
                          stdout=subprocess.DEVNULL)
    arguments = [argument for argument in pip_arguments if argument not in GET_PIP_ONLY_OPTIONS]
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet"] + arguments)


if __name__ == "__main__":
    if sys.argv[1:] == ["--install-cache"]:
        install_cache()
    else:
        bootstrap(sys.argv[1:])
