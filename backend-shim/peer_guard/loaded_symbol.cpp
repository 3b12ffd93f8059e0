// loaded_symbol.h: an ELF dynamic symbol lookup over the loaded objects, by their GNU hash
// table (what every toolchain of the last decade emits) or their SysV one (DT_HASH).
#include "backend-shim/peer_guard/loaded_symbol.h"

#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

namespace gvirtus::peer_guard {
namespace {

struct Search {
  const char* name;
  ElfW(Addr) self;  // an address inside the guard's own object
  uint32_t gnuHash;
  unsigned long sysvHash;
  void* found;
};

uint32_t gnuHashOf(const char* name) {
  uint32_t hash = 5381;
  for (const auto* c = reinterpret_cast<const unsigned char*>(name); *c != '\0'; ++c) {
    hash = hash * 33 + *c;
  }
  return hash;
}

unsigned long sysvHashOf(const char* name) {
  unsigned long hash = 0;
  for (const auto* c = reinterpret_cast<const unsigned char*>(name); *c != '\0'; ++c) {
    hash = (hash << 4) + *c;
    const unsigned long high = hash & 0xf0000000;
    if (high != 0) {
      hash ^= high >> 24;
    }
    hash &= ~high;
  }
  return hash;
}

// The dynamic section's pointers: the loader rewrites them to addresses on most machines, and
// leaves them relative to the object's base on a few (and in the vDSO).
template <typename T>
const T* dynamicPointer(const dl_phdr_info* object, ElfW(Addr) value) {
  return reinterpret_cast<const T*>(value < object->dlpi_addr ? value + object->dlpi_addr : value);
}

struct Tables {
  const ElfW(Sym) * symbols = nullptr;
  const char* strings = nullptr;
  const uint32_t* gnuHash = nullptr;
  const ElfW(Word) * sysvHash = nullptr;
};

Tables tablesOf(const dl_phdr_info* object) {
  Tables tables;
  for (int i = 0; i < object->dlpi_phnum; ++i) {
    if (object->dlpi_phdr[i].p_type != PT_DYNAMIC) {
      continue;
    }
    const auto* entry =
        reinterpret_cast<const ElfW(Dyn)*>(object->dlpi_addr + object->dlpi_phdr[i].p_vaddr);
    for (; entry->d_tag != DT_NULL; ++entry) {
      switch (entry->d_tag) {
        case DT_SYMTAB:
          tables.symbols = dynamicPointer<ElfW(Sym)>(object, entry->d_un.d_ptr);
          break;
        case DT_STRTAB:
          tables.strings = dynamicPointer<char>(object, entry->d_un.d_ptr);
          break;
        case DT_GNU_HASH:
          tables.gnuHash = dynamicPointer<uint32_t>(object, entry->d_un.d_ptr);
          break;
        case DT_HASH:
          tables.sysvHash = dynamicPointer<ElfW(Word)>(object, entry->d_un.d_ptr);
          break;
        default:
          break;
      }
    }
  }
  return tables;
}

// A definition of a function another object may call (not an undefined reference, not data,
// not local; no CUDA entry point is an indirect function, whose address would be its
// resolver's).
void* definedFunction(const dl_phdr_info* object, const Tables& tables, uint32_t index,
                      const char* name) {
  const ElfW(Sym)& symbol = tables.symbols[index];
  if (symbol.st_shndx == SHN_UNDEF || symbol.st_value == 0 ||
      ELF64_ST_TYPE(symbol.st_info) != STT_FUNC || ELF64_ST_BIND(symbol.st_info) == STB_LOCAL ||
      strcmp(tables.strings + symbol.st_name, name) != 0) {
    return nullptr;
  }
  return reinterpret_cast<void*>(object->dlpi_addr + symbol.st_value);
}

void* lookUpGnu(const dl_phdr_info* object, const Tables& tables, const Search& search) {
  const uint32_t buckets = tables.gnuHash[0];
  const uint32_t firstSymbol = tables.gnuHash[1];
  const uint32_t bloomWords = tables.gnuHash[2];
  if (buckets == 0) {
    return nullptr;
  }
  const auto* bucket = reinterpret_cast<const uint32_t*>(
      reinterpret_cast<const ElfW(Addr)*>(tables.gnuHash + 4) + bloomWords);
  const uint32_t* chain = bucket + buckets;
  uint32_t index = bucket[search.gnuHash % buckets];
  if (index < firstSymbol) {
    return nullptr;
  }
  for (;; ++index) {
    const uint32_t hash = chain[index - firstSymbol];
    if ((hash | 1) == (search.gnuHash | 1)) {
      if (void* found = definedFunction(object, tables, index, search.name)) {
        return found;
      }
    }
    if ((hash & 1) != 0) {
      return nullptr;
    }
  }
}

void* lookUpSysv(const dl_phdr_info* object, const Tables& tables, const Search& search) {
  const ElfW(Word) buckets = tables.sysvHash[0];
  if (buckets == 0) {
    return nullptr;
  }
  const ElfW(Word)* bucket = tables.sysvHash + 2;
  const ElfW(Word)* chain = bucket + buckets;
  for (ElfW(Word) index = bucket[search.sysvHash % buckets]; index != STN_UNDEF;
       index = chain[index]) {
    if (void* found = definedFunction(object, tables, index, search.name)) {
      return found;
    }
  }
  return nullptr;
}

bool holds(const dl_phdr_info* object, ElfW(Addr) address) {
  for (int i = 0; i < object->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = object->dlpi_phdr[i];
    const ElfW(Addr) start = object->dlpi_addr + segment.p_vaddr;
    if (segment.p_type == PT_LOAD && address >= start && address - start < segment.p_memsz) {
      return true;
    }
  }
  return false;
}

int visit(dl_phdr_info* object, size_t, void* data) {
  auto& search = *static_cast<Search*>(data);
  if (holds(object, search.self)) {
    return 0;  // the guard: its functions are the stand-ins
  }
  const Tables tables = tablesOf(object);
  if (tables.symbols == nullptr || tables.strings == nullptr) {
    return 0;
  }
  void* found = nullptr;
  if (tables.gnuHash != nullptr) {
    found = lookUpGnu(object, tables, search);
  } else if (tables.sysvHash != nullptr) {
    found = lookUpSysv(object, tables, search);
  }
  if (found == nullptr) {
    return 0;
  }
  search.found = found;
  return 1;
}

}  // namespace

void* loadedFunction(const char* name) {
  Search search{name, reinterpret_cast<ElfW(Addr)>(&gnuHashOf), gnuHashOf(name), sysvHashOf(name),
                nullptr};
  dl_iterate_phdr(visit, &search);
  return search.found;
}

}  // namespace gvirtus::peer_guard
