"""Jupyter's kernel spec manager, without its search of ~/.ipython/kernels.

jupyter_client's KernelSpecManager adds IPython's own kernels directory (a
location from IPython 2.x) to the Jupyter path, and to find it imports
IPython.paths, which imports all of IPython (prompt_toolkit, jedi, …) into
the Jupyter server the moment the first kernel starts: about 0.28 s of CPU on
the build host, about 8 s of an e2b-ci boot under QEMU/TCG. The server itself
never runs IPython; the kernels import their own.

This manager searches Jupyter's own kernel directories only
(`jupyter kernelspec list`'s: the user's ~/.local/share/jupyter/kernels, the
environment's and the system's). jupyter_server_config.py selects it
(os-image/e2b-ci/PATCHES, 0005).
"""
from jupyter_client.kernelspec import KernelSpecManager as _JupyterKernelSpecManager
from jupyter_core.paths import jupyter_path
from traitlets import default


class KernelSpecManager(_JupyterKernelSpecManager):
    @default("kernel_dirs")
    def _kernel_dirs_default(self):
        return jupyter_path("kernels")
