# E2B's older template format, as `e2b template init` / `e2b template build`
# wrote it: this e2b.Dockerfile with e2b.toml. Build it (template/README.md):
#
#     make template=examples/templates/e2b-dockerfile
#
# E2B's own image is our e2b-base flavor (e2bdev/code-interpreter: e2b-ci).
FROM e2bdev/base:latest

# A Dockerfile's steps start as root in / (Docker's defaults, as E2B's parser
# sets them); RUN has the network, as on E2B: apt through the build's mirror.
RUN apt-get update && apt-get install -y --no-install-recommends python3
RUN useradd --create-home --shell /bin/bash app && install -d -o app -g app /opt/app
WORKDIR /opt/app
COPY --chown=app:app --chmod=0755 app/serve.sh serve.sh
COPY --chown=app app/static static
ENV GREETING="hello from an e2b.Dockerfile"
USER app
RUN echo "built by $(id -un) in $(pwd)" > build-info.txt
# e2b.toml's start_cmd replaces this, as E2B's CLI does.
CMD ["./serve.sh", "8080"]
