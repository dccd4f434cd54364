#!/bin/sh
# The klp-build kernel's .config, made in the current (in-tree) kernel directory: tinyconfig
# plus what livepatch and klp-build need (LIVEPATCH selects KLP_BUILD; no LTO, no dead code
# elimination, no randstruct), a serial console, an initramfs, PVH boot (qemu -kernel
# vmlinux) and ACPI (without it `poweroff -f` halts and qemu never exits), and the kobject
# sample as a module.
# Usage: sh config.sh   (run at the top of the 7.x tree; ARCH=x86_64)
set -e
make ARCH=x86_64 tinyconfig
./scripts/config --file .config \
 -d CC_OPTIMIZE_FOR_SIZE -e CC_OPTIMIZE_FOR_PERFORMANCE \
 -d UNWINDER_GUESS -e UNWINDER_ORC \
 -d LD_DEAD_CODE_DATA_ELIMINATION -d TRIM_UNUSED_KSYMS -d READABLE_ASM \
 -e SMP --set-val NR_CPUS 4 \
 -e PRINTK -e BUG -e JUMP_LABEL -e TTY -e SERIAL_8250 -e SERIAL_8250_CONSOLE \
 -e BLK_DEV_INITRD -d RD_BZIP2 -d RD_LZMA -d RD_XZ -d RD_LZO -d RD_LZ4 -d RD_ZSTD \
 -d KERNEL_XZ -e KERNEL_GZIP \
 -e BINFMT_ELF -e BINFMT_SCRIPT -e PROC_FS -e PROC_SYSCTL -e SYSFS -e DEVTMPFS \
 -e FUTEX -e MULTIUSER \
 -e HYPERVISOR_GUEST -e PVH -e PCI -e ACPI \
 -d VT -d INPUT -d HID -d VGA_CONSOLE -d LEGACY_PTYS -d INTEL_MEI -d SERIO \
 -d SERIAL_8250_PCI -d SERIAL_8250_EXAR -d SERIAL_8250_LPSS -d SERIAL_8250_MID -d SERIAL_8250_PERICOM \
 -e MODULES -e MODULE_UNLOAD \
 -e KALLSYMS -e KALLSYMS_ALL \
 -e FTRACE -e FUNCTION_TRACER -e DYNAMIC_FTRACE \
 -e LIVEPATCH \
 -e SAMPLES -m SAMPLE_KOBJECT
make ARCH=x86_64 olddefconfig
# Fail early if kconfig dropped something klp-build or the guest needs.
for o in 64BIT SMP UNWINDER_ORC HAVE_RELIABLE_STACKTRACE MODULES MODULE_UNLOAD KALLSYMS_ALL \
	DYNAMIC_FTRACE DYNAMIC_FTRACE_WITH_ARGS LIVEPATCH KLP_BUILD OBJTOOL PVH SERIAL_8250_CONSOLE \
	BLK_DEV_INITRD BINFMT_SCRIPT DEVTMPFS PROC_SYSCTL PCI ACPI JUMP_LABEL BUG; do
	grep -q "^CONFIG_$o=y" .config || { echo "missing CONFIG_$o=y" >&2; exit 1; }
done
grep -q '^CONFIG_SAMPLE_KOBJECT=m' .config || { echo "missing CONFIG_SAMPLE_KOBJECT=m" >&2; exit 1; }
for o in LD_DEAD_CODE_DATA_ELIMINATION GCC_PLUGIN_RANDSTRUCT GCC_PLUGIN_LATENT_ENTROPY TRIM_UNUSED_KSYMS READABLE_ASM; do
	! grep -q "^CONFIG_$o=y" .config || { echo "CONFIG_$o must be off" >&2; exit 1; }
done
