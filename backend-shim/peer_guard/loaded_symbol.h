#pragma once

// The real function behind one the guard stands in for, found in the objects the process has
// loaded. dlsym(RTLD_NEXT) cannot be used: it needs libdl's versioned symbols (GLIBC_2.34 in
// the C library itself) and it searches only the global scope, while GVirtuS loads its
// plugins, and the CUDA runtime they need, with dlopen's local scope. So the guard reads the
// dynamic symbol tables itself, through dl_iterate_phdr (in every glibc since 2.2.4).
namespace gvirtus::peer_guard {

// The address of the first function named `name` that an object loaded now defines, in load
// order, other than the guard itself (whose stand-in it is); null when none does.
// Allocation-free and lock-free on the guard's side; dl_iterate_phdr takes the loader's lock
// while it runs.
void* loadedFunction(const char* name);

}  // namespace gvirtus::peer_guard
