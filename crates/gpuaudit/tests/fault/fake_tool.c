/* A fake nvidia-smi or python3 (the name it was started as says which):
 * GPUAUDIT_FAULT_SMI / GPUAUDIT_FAULT_PYTHON = hang | segv | abort | fork | flood | good.
 * After the misbehaviour (fork, flood), and in "good" mode, nvidia-smi prints the file named
 * by GPUAUDIT_FAULT_SMI_OUT (or fails as a machine without a driver does), python3 prints a
 * torch query answer. */
#include "misbehave.h"
#include <libgen.h>

int main(int argc, char **argv) {
    (void)argc;
    const char *name = basename(argv[0]);
    int smi = strcmp(name, "nvidia-smi") == 0;
    fault_common(smi ? "GPUAUDIT_FAULT_SMI" : "GPUAUDIT_FAULT_PYTHON", name);
    if (smi) {
        const char *out = getenv("GPUAUDIT_FAULT_SMI_OUT");
        FILE *f = out ? fopen(out, "r") : NULL;
        if (!f) {
            puts("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.");
            return 9;
        }
        char buf[1 << 16];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, n, stdout);
        fclose(f);
        return 0;
    }
    puts("{\"python\": \"3.12.3\", \"torch\": \"2.5.1+cu124\", \"cuda\": \"12.4\", \"arch_flags\": \"sm_80 sm_90\"}");
    return 0;
}
