"""An E2B template written with E2B's own Python SDK (`pip install e2b`), as
a team moving off E2B's cloud already has it: a small web app on port 3000,
run as its own non-root user, with its files' owner and mode, an env var and
a ready check. Write its JSON, then build it (template/README.md):

    python3 template.py > e2b.template.json
    make template=examples/templates/e2b-sdk
"""
from e2b import Template, wait_for_port

template = (
    Template()
    # E2B's default sandbox; here our flavor e2b-base.
    .from_template("base")
    # RUN steps have the network, as on E2B: apt through the build's own mirror.
    .apt_install(["python3"], no_install_recommends=True)
    # USER makes the account when the image has none (as E2B's build does).
    .set_user("app")
    # WORKDIR makes /opt/app as app's; COPY's own parents would be root's.
    .set_workdir("/opt/app")
    .copy("app/server.py", "/opt/app/server.py", user="app", mode=0o755)
    .copy("app/static", "static", user="app")
    .set_envs({"GREETING": "hello from an E2B template"})
    .run_cmd("echo \"built by $(id -un) in $(pwd)\" > build-info.txt")
    .set_start_cmd("python3 server.py 3000", wait_for_port(3000))
)

if __name__ == "__main__":
    print(Template.to_json(template))
