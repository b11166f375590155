# JupyterLab in the jitload container. The entrypoint always sets JUPYTER_TOKEN (given or generated): a token
# is required, and XSRF protection stays on.
import os

c = get_config()  # noqa: F821 (provided by Jupyter when it loads this file)
c.ServerApp.ip = os.environ.get("JITLOAD_BIND", "0.0.0.0")
c.ServerApp.port = int(os.environ.get("JITLOAD_JUPYTER_PORT", "8888"))
c.ServerApp.port_retries = 0  # a busy port is an error, not a silent move to another one
c.ServerApp.open_browser = False
c.ServerApp.root_dir = os.environ.get("JITLOAD_WORKSPACE", "/workspace")
c.ServerApp.disable_check_xsrf = False
c.IdentityProvider.token = os.environ["JUPYTER_TOKEN"]
