package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// newTree describes the code under test: the working tree bench-compare
// runs in, uncommitted changes included, since that is what is about to be
// committed.
type newTree struct {
	moduleRoot string // the directory of go.mod
	gitRoot    string // the top of the git working tree
	head       string // the commit checked out
	dirty      bool   // whether there are uncommitted changes
}

// findNewTree locates the module and the repository around the current
// directory. The module may sit below the repository's top; the base
// worktree then has it at the same relative path.
func findNewTree(ctx context.Context, goCmd string) (newTree, error) {
	gomod, err := gitOrGo(ctx, "", goCmd, "env", "GOMOD")
	if err != nil {
		return newTree{}, err
	}
	if gomod == "" || gomod == os.DevNull {
		return newTree{}, fmt.Errorf("not inside a Go module")
	}
	// git prints the top of the tree with symbolic links resolved; the
	// module's place below it is only found on the same footing.
	root, err := filepath.EvalSymlinks(filepath.Dir(gomod))
	if err != nil {
		return newTree{}, fmt.Errorf("locating the module: %w", err)
	}
	t := newTree{moduleRoot: root}
	if t.gitRoot, err = gitOrGo(ctx, t.moduleRoot, "git", "rev-parse", "--show-toplevel"); err != nil {
		return newTree{}, err
	}
	if t.head, err = gitOrGo(ctx, t.moduleRoot, "git", "rev-parse", "HEAD"); err != nil {
		return newTree{}, err
	}
	status, err := gitOrGo(ctx, t.moduleRoot, "git", "status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return newTree{}, err
	}
	t.dirty = status != ""
	return t, nil
}

// resolveCommit turns a revision (HEAD~3, a tag, a hash) into a commit
// hash, so the report says exactly what was compared.
func resolveCommit(ctx context.Context, gitRoot, rev string) (string, error) {
	if strings.HasPrefix(rev, "-") {
		return "", fmt.Errorf("base %q: not a revision", rev)
	}
	hash, err := gitOrGo(ctx, gitRoot, "git", "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("base %q is not a commit in %s: %w", rev, gitRoot, err)
	}
	return hash, nil
}

// addWorktree checks commit out, detached, in a new worktree at dir and
// returns the function that removes it. Removal runs on a context of its
// own, because it must happen after an interrupt has cancelled ctx.
func addWorktree(ctx context.Context, logger *log.Logger, gitRoot, commit, dir string) (remove func(), err error) {
	if _, err := runCommand(ctx, gitRoot, "git", "worktree", "add", "--detach", dir, commit); err != nil {
		return nil, fmt.Errorf("checking out the base: %w", err)
	}
	remove = func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if _, err := runCommand(ctx, gitRoot, "git", "worktree", "remove", "--force", dir); err != nil {
			// Not "git worktree prune": the repository's other worktrees
			// belong to other people.
			logger.Printf("removing the base worktree (run git worktree prune once it is gone): %v", err)
			os.RemoveAll(dir)
		}
	}
	return remove, nil
}

// gitOrGo runs a git or go query in dir and returns its trimmed output.
func gitOrGo(ctx context.Context, dir string, argv ...string) (string, error) {
	out, err := runCommand(ctx, dir, argv...)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}
