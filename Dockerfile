# mindtune console image (CPU). Build: docker build -t mindtune .
# Run (a login is required: the console listens on the container's interfaces):
#   printf 'alice:change-me\n' > auth && chmod 600 auth
#   docker run -p 7860:7860 -v ./auth:/run/secrets/mindtune_auth:ro \
#     -v mindtune-runs:/data/runs -v mindtune-uploads:/data/uploads -v ./models:/data/models mindtune
# or -e MINDTUNE_AUTH=alice:change-me instead of the secret file. Entry point: app/container.py.
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 GLOG_v=3
WORKDIR /opt/mindtune
# g++ builds the CPU's fused kernels on first use (core/engine/fused.py)
RUN apt-get update && apt-get install -y --no-install-recommends g++ && rm -rf /var/lib/apt/lists/*
COPY requirements.txt requirements-export.txt ./
RUN pip install --no-cache-dir -r requirements.txt
# llama.cpp for the GGUF downloads' check (built from source: g++ above; cmake comes from PyPI)
RUN CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" CMAKE_BUILD_PARALLEL_LEVEL=2 \
    pip install --no-cache-dir -r requirements-export.txt
COPY app ./app
COPY core ./core
COPY configs ./configs
COPY models ./models
COPY data ./data
# runs, uploaded datasets and saved configs, more model folders, more datasets (app/container.py)
VOLUME ["/data/runs", "/data/uploads", "/data/models", "/data/datasets"]
EXPOSE 7860
# arguments after the image name go to `python -m app` (docker run ... mindtune --lang zh)
ENTRYPOINT ["python", "-m", "app.container"]
