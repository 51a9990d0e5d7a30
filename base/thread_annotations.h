// Clang thread-safety annotations (-Wthread-safety): macros that state which mutex guards a
// member and which mutexes a function needs held or not held, so that the compiler checks the
// locking instead of a comment. They expand to Clang's capability attributes under Clang and to
// nothing under any other compiler (gcc builds ignore them). scripts/thread-safety builds the
// tree with clang and -Werror=thread-safety.
//
// The annotations only help with mutexes that carry the attributes themselves: libstdc++'s
// std::mutex does not, so annotated code locks base/mutex.h's Mutex.
//
// Vocabulary (a "capability" is a mutex here):
//   GUARDED_BY(mu)      on a member: reads need `mu` held (shared or exclusive), writes exclusive.
//   PT_GUARDED_BY(mu)   on a pointer member: the pointee is guarded by `mu` (the pointer is not).
//   REQUIRES(mu...)     on a function: the caller holds `mu` exclusively.
//   REQUIRES_SHARED     the same, held at least shared.
//   EXCLUDES(mu...)     on a function: the caller does not hold `mu` (the function locks it).
//   ACQUIRE / RELEASE   the function locks / unlocks `mu` (no argument: `this`).
//   TRY_ACQUIRE(r, mu)  the function locks `mu` when it returns `r`.
//   ASSERT_CAPABILITY   the function checks (or documents) that `mu` is held; the analysis then
//                       assumes so for the rest of the caller's scope.
//   RETURN_CAPABILITY   the function returns a reference to `mu` (an accessor).
//   CAPABILITY(name)    on a class: its objects are capabilities (e.g. "mutex").
//   SCOPED_CAPABILITY   on a class: an RAII lock, holding what its constructor acquires until
//                       its destructor.
//   NO_THREAD_SAFETY_ANALYSIS  on a function: not checked (say why next to it).
//
// Thread-safety: macros only; nothing at run time.
#ifndef SIEVE_BASE_THREAD_ANNOTATIONS_H_
#define SIEVE_BASE_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define SIEVE_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define SIEVE_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(name) SIEVE_THREAD_ANNOTATION(capability(name))
#define SCOPED_CAPABILITY SIEVE_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) SIEVE_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) SIEVE_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) SIEVE_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) SIEVE_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define REQUIRES(...) SIEVE_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) SIEVE_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE(...) SIEVE_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) SIEVE_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) SIEVE_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) SIEVE_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) SIEVE_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) SIEVE_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) SIEVE_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) SIEVE_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS SIEVE_THREAD_ANNOTATION(no_thread_safety_analysis)

#endif  // SIEVE_BASE_THREAD_ANNOTATIONS_H_
