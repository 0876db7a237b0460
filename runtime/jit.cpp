// jit.cpp - libnest_jit.so: C source to an object in memory with clang's libraries, and objects
// linked into the process with LLVM's ORC JIT. The only C++ in nest; it exports one function,
// nest_jit_shim(), whose table is described in rt.h. libnest dlopens this library on first use,
// so a program that never JITs never loads LLVM.
//
// Compiling: clang's driver turns the arguments into cc1 arguments (it knows the resource
// directory, where stddef.h and omp.h live, and what -march=native means), the source is
// remapped in memory, and EmitObjAction runs clang's own pipeline (the one `clang -c` runs) into
// a memory stream. Diagnostics are printed into a string, never to stderr.
//
// Loading: one ORC execution session and object linking layer for the process (no LLJIT: it
// would build a TargetMachine nobody uses, most of a millisecond). Each loaded object gets its
// own JITDylib (so two kernels may define the same symbol) whose link order ends in a JITDylib
// of process symbols; freeing the code removes its JITDylib, which frees its memory. libomp and
// libmvec are opened the first time an object needs one of their symbols.

#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "clang/Basic/Diagnostic.h"
#include "clang/Basic/DiagnosticOptions.h"
#include "clang/CodeGen/CodeGenAction.h"
#include "clang/Driver/Compilation.h"
#include "clang/Driver/Driver.h"
#include "clang/Driver/Job.h"
#include "clang/Driver/Tool.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/CompilerInvocation.h"
#include "clang/Frontend/TextDiagnosticPrinter.h"
#include "clang/Lex/PreprocessorOptions.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/CrashRecoveryContext.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/Process.h"
#include "llvm/ExecutionEngine/Orc/Core.h"
#include "llvm/ExecutionEngine/Orc/ExecutorProcessControl.h"
#include "llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h"
#include "llvm/ExecutionEngine/SectionMemoryManager.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/Host.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

extern "C" {
#include "nest.h"
#include "rt.h"
}

#ifndef NEST_LLVM_DIR
#define NEST_LLVM_DIR "/usr/lib/llvm-14"
#endif

#define EXPORT __attribute__((visibility("default")))

using namespace llvm;

namespace {

// A malloc'd copy of s for the C side (NULL when out of memory: the caller sees no message).
char *dupstr(const std::string &s)
{
    char *p = static_cast<char *>(malloc(s.size() + 1));
    if (p)
        memcpy(p, s.c_str(), s.size() + 1);
    return p;
}

void set_err(char **err, const std::string &s)
{
    if (err)
        *err = dupstr(s);
}

// Once per process, before anything of clang or LLVM runs: without the native target, clang
// builds no TargetMachine and the optimizer silently emits scalar code.
void init_llvm()
{
    static std::once_flag once;
    std::call_once(once, [] {
        InitializeNativeTarget();
        InitializeNativeTargetAsmPrinter();
        InitializeNativeTargetAsmParser();
    });
}

// LLVM's fatal errors (a backend that cannot select an instruction for some input) end the
// process by default: the program that called nest_compile would die. As in clang's own driver,
// a fatal error inside a compile instead leaves through sys::Process::Exit, which a
// CrashRecoveryContext around the compile turns into a return; the compile fails with LLVM's
// message, and what it had allocated is leaked. Enabling recovery installs LLVM's signal
// handlers; the program's own are put back at once, so real crashes stay the program's
// business: only fatal errors, which LLVM reports deliberately, are recovered.
thread_local std::string fatal_reason;

void on_fatal_error(void *, const char *reason, bool)
{
    fatal_reason = reason ? reason : "fatal error";
    sys::Process::Exit(1); // returns to the CrashRecoveryContext of the running compile
}

void init_recovery()
{
    static std::once_flag once;
    std::call_once(once, [] {
        static const int sigs[] = {SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGSEGV, SIGTRAP};
        struct sigaction saved[sizeof sigs / sizeof sigs[0]];
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            sigaction(sigs[i], nullptr, &saved[i]);
        CrashRecoveryContext::Enable();
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            sigaction(sigs[i], &saved[i], nullptr);
        install_fatal_error_handler(on_fatal_error, nullptr);
    });
}

// ---------------------------------------------------------------------------------------------
// host(): the CPU and its features, part of every cache key
// ---------------------------------------------------------------------------------------------

const char *host()
{
    static std::once_flag once;
    static std::string desc;
    std::call_once(once, [] {
        std::vector<std::string> on;
        StringMap<bool> features;
        if (sys::getHostCPUFeatures(features))
            for (auto &f : features)
                if (f.getValue())
                    on.push_back(f.getKey().str());
        std::sort(on.begin(), on.end());
        desc = sys::getProcessTriple() + " " + sys::getHostCPUName().str() + " ";
        for (size_t i = 0; i < on.size(); i++)
            desc += (i ? ",+" : "+") + on[i];
    });
    return desc.c_str();
}

// ---------------------------------------------------------------------------------------------
// compile(): C source to an ELF object in memory
// ---------------------------------------------------------------------------------------------

// -mllvm options are LLVM's process-wide settings: clang's cc1 applies them when it starts, a
// CompilerInstance ignores them. Each distinct one is applied once, while no compile runs
// (compiles hold the lock shared); one that LLVM rejects fails the compile.
std::shared_mutex llvm_opts_mu;
std::set<std::string> llvm_opts_applied;

bool apply_llvm_args(const std::vector<std::string> &args, std::string &msg)
{
    {
        std::shared_lock<std::shared_mutex> g(llvm_opts_mu);
        bool all = true;
        for (auto &a : args)
            all = all && llvm_opts_applied.count(a);
        if (all)
            return true;
    }
    std::unique_lock<std::shared_mutex> g(llvm_opts_mu);
    std::vector<const char *> argv = {"nest-jit"};
    for (auto &a : args)
        if (!llvm_opts_applied.count(a))
            argv.push_back(a.c_str());
    if (argv.size() == 1)
        return true;
    raw_string_ostream os(msg);
    bool ok = cl::ParseCommandLineOptions(static_cast<int>(argv.size()), argv.data(), "", &os);
    os.flush();
    if (ok)
        for (size_t i = 1; i < argv.size(); i++)
            llvm_opts_applied.insert(argv[i]);
    return ok;
}

int compile(const char *src, size_t len, const char *name, const char *const *args, int nargs,
            void **obj, size_t *objlen, char **err)
{
    *obj = nullptr;
    *objlen = 0;
    if (err)
        *err = nullptr;
    init_llvm();
    init_recovery();
    if (!name || !*name)
        name = "nest.c";

    std::string diag_text;
    raw_string_ostream diag_os(diag_text);

    // The driver computes cc1's arguments; its own diagnostics (an unknown option) land in the
    // same string.
    IntrusiveRefCntPtr<clang::DiagnosticOptions> dopts(new clang::DiagnosticOptions());
    dopts->ShowColors = false;
    clang::DiagnosticsEngine ddiags(
        IntrusiveRefCntPtr<clang::DiagnosticIDs>(new clang::DiagnosticIDs()), dopts,
        new clang::TextDiagnosticPrinter(diag_os, dopts.get()), /*ShouldOwnClient=*/true);

    std::vector<const char *> argv = {NEST_LLVM_DIR "/bin/clang", "-c",
                                      "-fno-color-diagnostics", "-fmessage-length=0"};
    for (int i = 0; i < nargs; i++)
        argv.push_back(args[i]);
    argv.push_back("-x");
    argv.push_back("c");
    argv.push_back(name);

    clang::driver::Driver drv(argv[0], sys::getProcessTriple(), ddiags, "nest jit");
    drv.setCheckInputsExist(false);
    std::unique_ptr<clang::driver::Compilation> comp(drv.BuildCompilation(argv));
    if (!comp || ddiags.hasErrorOccurred()) {
        diag_os.flush();
        set_err(err, diag_text.empty() ? "clang: the driver rejected the arguments" : diag_text);
        return NEST_ERR_COMPILE;
    }
    const clang::driver::JobList &jobs = comp->getJobs();
    if (jobs.size() != 1 || !isa<clang::driver::Command>(*jobs.begin()) ||
        StringRef(cast<clang::driver::Command>(*jobs.begin()).getCreator().getName()) != "clang") {
        set_err(err, "clang: the arguments do not make one compile job");
        return NEST_ERR_COMPILE;
    }
    const opt::ArgStringList &cc1 = cast<clang::driver::Command>(*jobs.begin()).getArguments();

    auto inv = std::make_shared<clang::CompilerInvocation>();
    if (!clang::CompilerInvocation::CreateFromArgs(*inv, cc1, ddiags) ||
        ddiags.hasErrorOccurred()) {
        diag_os.flush();
        set_err(err, diag_text.empty() ? "clang: invalid arguments" : diag_text);
        return NEST_ERR_COMPILE;
    }
    // The driver asks for -disable-free (a compiler process exits right after); a library must
    // free: otherwise every compile leaks its AST and its TargetMachine (~250 KB).
    inv->getFrontendOpts().DisableFree = false;
    inv->getCodeGenOpts().DisableFree = false;
    inv->getDiagnosticOpts().ShowColors = false;
    std::string optmsg;
    if (!apply_llvm_args(inv->getFrontendOpts().LLVMArgs, optmsg)) {
        set_err(err, "clang: -mllvm: " + optmsg);
        return NEST_ERR_COMPILE;
    }
    std::shared_lock<std::shared_mutex> opts_stay(llvm_opts_mu);
    // The source in memory. We keep ownership: clang would free it only when it got as far as
    // making a source manager, and leak it when failing earlier (an unknown -march).
    std::unique_ptr<MemoryBuffer> source = MemoryBuffer::getMemBuffer(StringRef(src, len), name,
                                                                      /*RequiresNullTerminator=*/false);
    inv->getPreprocessorOpts().RetainRemappedFileBuffers = true;
    inv->getPreprocessorOpts().addRemappedFile(name, source.get());

    // The compiler instance lives on the heap: after a fatal error it is left as it is (see
    // init_recovery), since its state is whatever LLVM had reached.
    auto *ci = new clang::CompilerInstance();
    ci->setInvocation(inv);
    ci->createDiagnostics(new clang::TextDiagnosticPrinter(diag_os, &ci->getDiagnosticOpts()),
                          /*ShouldOwnClient=*/true);
    // "N errors generated." goes to the verbose stream: drop it, the diagnostics say it all.
    ci->setVerboseOutputStream(std::make_unique<raw_null_ostream>());

    SmallVector<char, 0> objbuf;
    ci->setOutputStream(std::make_unique<raw_svector_ostream>(objbuf));
    bool ok = false;
    CrashRecoveryContext crc;
    if (!crc.RunSafely([&] {
            clang::EmitObjAction act;
            ok = ci->ExecuteAction(act);
        })) {
        diag_os.flush();
        set_err(err, "clang: internal error: " + fatal_reason +
                         (diag_text.empty() ? "" : "\n" + diag_text));
        return NEST_ERR_COMPILE;
    }
    std::unique_ptr<clang::CompilerInstance> ci_owner(ci);
    diag_os.flush();
    if (!ok || ci->getDiagnostics().hasErrorOccurred() || objbuf.empty()) {
        set_err(err, diag_text.empty() ? "clang: compilation failed" : diag_text);
        return NEST_ERR_COMPILE;
    }
    void *p = malloc(objbuf.size());
    if (!p) {
        set_err(err, "out of memory");
        return NEST_ERR_NOMEM;
    }
    memcpy(p, objbuf.data(), objbuf.size());
    *obj = p;
    *objlen = objbuf.size();
    return NEST_OK;
}

// ---------------------------------------------------------------------------------------------
// The process-wide JIT
// ---------------------------------------------------------------------------------------------

// Symbols of the process for JIT'd code. OpenMP's entry points come from LLVM's libomp and the
// vector math variants (_ZGV...) from glibc's libmvec, each opened on first need; the rest
// (libm's expf, memset, ...) from the process and, failing that, libm.
class ProcessSymbols : public orc::DefinitionGenerator {
public:
    Error tryToGenerate(orc::LookupState &, orc::LookupKind, orc::JITDylib &JD,
                        orc::JITDylibLookupFlags, const orc::SymbolLookupSet &set) override
    {
        orc::SymbolMap found;
        for (auto &kv : set) {
            StringRef name = *kv.first;
            void *addr = find(name.str().c_str());
            if (addr)
                found[kv.first] =
                    JITEvaluatedSymbol(pointerToJITTargetAddress(addr), JITSymbolFlags::Exported);
        }
        if (found.empty())
            return Error::success();
        return JD.define(orc::absoluteSymbols(std::move(found)));
    }

private:
    static void *open_once(void *&handle, bool &tried, const char *const *paths)
    {
        if (!tried) {
            tried = true;
            for (; *paths && !handle; paths++)
                handle = dlopen(*paths, RTLD_NOW | RTLD_LOCAL);
        }
        return handle;
    }

    void *find(const char *name)
    {
        // The generator runs under the session's lock, but lookups from distinct JITDylibs may
        // still overlap: guard the lazily opened handles.
        std::lock_guard<std::mutex> g(mu_);
        static const char *const omp_paths[] = {NEST_LLVM_DIR "/lib/libomp.so.5", "libomp.so.5",
                                                nullptr};
        static const char *const mvec_paths[] = {"libmvec.so.1", nullptr};
        static const char *const m_paths[] = {"libm.so.6", nullptr};
        bool omp = !strncmp(name, "__kmpc_", 7) || !strncmp(name, "omp_", 4) ||
                   !strncmp(name, "ompt_", 5);
        if (omp) {
            // From libomp only: a program linked with gcc's libgomp also has omp_* symbols,
            // and mixing the two runtimes gives wrong thread numbers.
            void *h = open_once(omp_, omp_tried_, omp_paths);
            return h ? dlsym(h, name) : nullptr;
        }
        if (!strncmp(name, "_ZGV", 4)) {
            void *h = open_once(mvec_, mvec_tried_, mvec_paths);
            if (h)
                if (void *p = dlsym(h, name))
                    return p;
        }
        if (void *p = dlsym(RTLD_DEFAULT, name))
            return p;
        void *h = open_once(m_, m_tried_, m_paths);
        return h ? dlsym(h, name) : nullptr;
    }

    std::mutex mu_;
    void *omp_ = nullptr, *mvec_ = nullptr, *m_ = nullptr;
    bool omp_tried_ = false, mvec_tried_ = false, m_tried_ = false;
};

struct Jit {
    std::unique_ptr<orc::ExecutionSession> es;
    std::unique_ptr<orc::RTDyldObjectLinkingLayer> linker;
    orc::JITDylib *process = nullptr;
    std::string reported; // errors the session reports outside of a lookup's result
    unsigned long next_id = 0;
};

// Loads, lookups and frees are serialized; compiles run in parallel.
std::mutex jit_mu;
// Reachable for the life of the process, never destroyed: code may run until exit, and LLVM's
// own statics may be gone by the time a static destructor would run.
Jit *the_jit;

Jit *get_jit(std::string &msg)
{
    if (the_jit)
        return the_jit;
    auto epc = orc::SelfExecutorProcessControl::Create();
    if (!epc) {
        msg = toString(epc.takeError());
        return nullptr;
    }
    std::unique_ptr<Jit> j(new Jit);
    j->es = std::make_unique<orc::ExecutionSession>(std::move(*epc));
    Jit *jp = j.get();
    // The default reporter prints to stderr; keep the text for the failing load instead.
    j->es->setErrorReporter([jp](Error e) {
        std::string s = toString(std::move(e));
        if (!jp->reported.empty())
            jp->reported += "\n";
        jp->reported += s;
    });
    j->linker = std::make_unique<orc::RTDyldObjectLinkingLayer>(
        *j->es, [] { return std::make_unique<SectionMemoryManager>(); });
    j->process = &j->es->createBareJITDylib("nest.process");
    j->process->addGenerator(std::make_unique<ProcessSymbols>());
    the_jit = j.release();
    return the_jit;
}

} // namespace

struct rt_shim_code {
    orc::JITDylib *jd;
    std::vector<std::pair<std::string, void *>> symbols; // the object's global definitions
};

namespace {

void free_code(rt_shim_code *c)
{
    if (!c)
        return;
    {
        std::lock_guard<std::mutex> g(jit_mu);
        if (c->jd && the_jit)
            consumeError(the_jit->es->removeJITDylib(*c->jd));
    }
    delete c;
}

int load_object(const void *obj, size_t len, rt_shim_code **out, char **err)
{
    *out = nullptr;
    if (err)
        *err = nullptr;
    MemoryBufferRef ref(StringRef(static_cast<const char *>(obj), len), "nest-object");

    // The object's global definitions: all of them are resolved now, so that a missing symbol
    // fails the load (not a later lookup) and lookups need no lock.
    std::vector<std::string> names;
    {
        auto of = object::ObjectFile::createObjectFile(ref);
        if (!of) {
            set_err(err, "jit: not an object file: " + toString(of.takeError()));
            return NEST_ERR_COMPILE;
        }
        for (const object::SymbolRef &sym : (*of)->symbols()) {
            auto flags = sym.getFlags();
            auto type = sym.getType();
            auto name = sym.getName();
            if (!flags || !type || !name) {
                consumeError(flags.takeError());
                consumeError(type.takeError());
                consumeError(name.takeError());
                continue;
            }
            if ((*flags & object::SymbolRef::SF_Undefined) ||
                !(*flags & object::SymbolRef::SF_Global) ||
                (*flags & object::SymbolRef::SF_Hidden))
                continue;
            if (*type != object::SymbolRef::ST_Function && *type != object::SymbolRef::ST_Data &&
                *type != object::SymbolRef::ST_Unknown)
                continue;
            if (name->empty())
                continue;
            names.push_back(name->str());
        }
    }

    std::lock_guard<std::mutex> g(jit_mu);
    std::string msg;
    Jit *j = get_jit(msg);
    if (!j) {
        set_err(err, "jit: cannot create the JIT: " + msg);
        return NEST_ERR_UNAVAILABLE;
    }
    orc::ExecutionSession &es = *j->es;
    j->reported.clear();
    orc::JITDylib &jd = es.createBareJITDylib("nest.code." + std::to_string(++j->next_id));
    jd.addToLinkOrder(*j->process);

    std::unique_ptr<rt_shim_code> c(new rt_shim_code);
    c->jd = &jd;
    auto fail = [&](Error e) {
        std::string s = toString(std::move(e));
        if (!j->reported.empty())
            s = j->reported + "\n" + s;
        j->reported.clear();
        consumeError(es.removeJITDylib(jd));
        set_err(err, "jit: " + s);
        return NEST_ERR_COMPILE;
    };
    if (Error e = j->linker->add(jd, MemoryBuffer::getMemBufferCopy(ref.getBuffer(),
                                                                   "nest-object")))
        return fail(std::move(e));
    if (!names.empty()) {
        orc::SymbolLookupSet set;
        for (auto &n : names)
            set.add(es.intern(n));
        auto syms = es.lookup(orc::makeJITDylibSearchOrder(&jd), std::move(set));
        if (!syms)
            return fail(syms.takeError());
        for (auto &kv : *syms)
            c->symbols.emplace_back((*kv.first).str(),
                                    jitTargetAddressToPointer<void *>(kv.second.getAddress()));
        std::sort(c->symbols.begin(), c->symbols.end());
    }
    *out = c.release();
    return NEST_OK;
}

void *lookup(rt_shim_code *c, const char *symbol)
{
    if (!c || !symbol)
        return nullptr;
    auto it = std::lower_bound(
        c->symbols.begin(), c->symbols.end(), symbol,
        [](const std::pair<std::string, void *> &a, const char *s) { return a.first < s; });
    if (it == c->symbols.end() || it->first != symbol)
        return nullptr;
    return it->second;
}

int abi()
{
    return RT_SHIM_ABI;
}

const char *llvm_version()
{
    return LLVM_VERSION_STRING;
}

const rt_shim_api the_api = {abi, host, compile, load_object, lookup, free_code, llvm_version};

} // namespace

extern "C" EXPORT const rt_shim_api *nest_jit_shim(void)
{
    return &the_api;
}
